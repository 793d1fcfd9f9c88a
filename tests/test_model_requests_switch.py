"""ROLECAST_ALLOW_MODEL_REQUESTS=0 / allow_model_requests(False): no test reaches a real model by accident.

tests/conftest.py sets the variable to 0 for the whole session; these tests check what it does:
a real provider raises ModelRequestsBlocked before its request leaves the process, the scripted
doubles answer as always, and a test (or a block) allows requests explicitly.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from servers import FakeOpenAIServer

from actions import Action
from environment import Team
from rolecast.errors import ModelRequestsBlocked, UsageError
from rolecast.llm.base import ALLOW_MODEL_REQUESTS_ENV, model_requests_allowed
from rolecast.llm.embedders import HashingEmbedder
from rolecast.llm.openai.provider import OpenAILLM
from rolecast.testing import FunctionLLM, ScriptedLLM, allow_model_requests
from roles import Role


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    srv = FakeOpenAIServer().start()
    try:
        yield srv
    finally:
        srv.stop()


def _llm(url: str) -> OpenAILLM:
    return OpenAILLM("gpt-4o-mini", base_url=url, api_key="sk-test", max_retries=0, timeout=5.0)


def test_the_unit_tests_run_with_model_requests_off() -> None:
    assert not model_requests_allowed()


async def test_a_real_provider_is_blocked_before_its_request_leaves(server: FakeOpenAIServer) -> None:
    llm = _llm(server.url)
    try:
        with pytest.raises(ModelRequestsBlocked) as caught:
            await llm.ask("hi")
        with pytest.raises(ModelRequestsBlocked):
            async for _ in llm.stream("hi"):
                pass
        with pytest.raises(ModelRequestsBlocked):
            await llm.choose("pick", 3)
    finally:
        await llm.aclose()
    assert server.requests == []  # nothing reached the server
    assert isinstance(caught.value, UsageError)
    assert "ROLECAST_ALLOW_MODEL_REQUESTS" in str(caught.value) and "gpt-4o-mini" in caught.value.provider


async def test_a_team_run_on_a_real_model_stops_with_the_typed_error(server: FakeOpenAIServer) -> None:
    llm = _llm(server.url)
    team = Team(llm=llm, roles=[Role(name="Ann", actions=[Action(name="Say")])], store=None)
    try:
        with pytest.raises(ModelRequestsBlocked):
            await team.run(n_round=1, idea="hello")
    finally:
        await llm.aclose()
    assert server.requests == []


async def test_doubles_and_word_hashing_are_not_model_requests() -> None:
    assert await ScriptedLLM(["yes"]).ask("q") == "yes"
    assert await FunctionLLM(lambda messages: "ok").ask("q") == "ok"
    assert len((await HashingEmbedder(16).embed(["a b"]))[0]) == 16


async def test_allowed_in_a_block_and_blocked_again_after(server: FakeOpenAIServer) -> None:
    llm = _llm(server.url)
    try:
        with allow_model_requests(True):
            assert await llm.ask("hi") == "Hello world"
        with pytest.raises(ModelRequestsBlocked):
            await llm.ask("hi")
    finally:
        await llm.aclose()
    assert len(server.requests) == 1


def test_the_code_setting_overrides_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, "1")
    assert model_requests_allowed()
    with allow_model_requests(False):
        assert not model_requests_allowed()
    assert model_requests_allowed()
    for off in ("0", "false", "No", " off "):
        monkeypatch.setenv(ALLOW_MODEL_REQUESTS_ENV, off)
        assert not model_requests_allowed()
    with pytest.raises(UsageError):
        allow_model_requests("yes")  # type: ignore[arg-type]


@pytest.mark.allow_model_requests
async def test_a_test_marked_to_allow_them_reaches_its_own_server(server: FakeOpenAIServer) -> None:
    llm = _llm(server.url)
    try:
        assert await llm.ask("hi") == "Hello world"
    finally:
        await llm.aclose()
    assert len(server.requests) == 1


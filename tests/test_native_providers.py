"""Every api_type of MetaGPT's config2.yaml, run end to end through rolecast's public API against a
server on 127.0.0.1 speaking that provider's wire: Anthropic's Messages API and Gemini's API (the fakes
in ``tests/fake_providers.py``, checked with the official SDKs below), and OpenAI's chat completions for
Azure, Ollama and the OpenAI-compatible services (``tests/servers.py``).

Each run: a MetaGPT-style team of two roles, one in react mode (its numeric state prompt answered by
the provider's constrained choice), a native tool loop (``ToolAgent(style="function_calling")``), a
stream, exact token counts and cost in the cost manager, 429-then-200 retried, a persistent 400 typed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_providers import Canned, FakeAnthropic, FakeGemini
from pydantic import BaseModel
from servers import FakeOpenAIServer, Reply, error_body

from actions import Action, UserRequirement
from actions.tools import calculator
from environment import Team
from memory import Message
from rolecast.context import Context
from rolecast.errors import LLMAPIError, LLMIncompleteError, LLMRateLimitError
from roles import Role
from roles.tool_agent import ToolAgent

pytestmark = pytest.mark.allow_model_requests

KEY = "sk-fake-5ecret-key"  # distinctive: no run log, span or message may hold it


# ------------------------------------------------------------------------------------ the team
class Draft(Action):
    name: str = "Draft"

    async def run(self, with_messages: list[Message] | None = None, **kwargs: Any) -> str:
        return await self._aask(f"Draft a plan for: {with_messages[-1].content if with_messages else ''}")


class Critique(Action):
    name: str = "Critique"

    async def run(self, with_messages: list[Message] | None = None, **kwargs: Any) -> str:
        return await self._aask("Critique the plan above.")


class Polish(Action):
    name: str = "Polish"

    async def run(self, with_messages: list[Message] | None = None, **kwargs: Any) -> str:
        return await self._aask("Polish the plan.")


class Planner(Role):
    name: str = "Alice"
    profile: str = "Planner"

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.set_actions([Draft])
        self._watch([UserRequirement])


class Reviewer(Role):
    name: str = "Bob"
    profile: str = "Reviewer"

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.set_actions([Critique, Polish])
        self._watch([Draft])
        self._set_react_mode("react", max_react_loop=2)


# ---------------------------------------------------------------------- what the servers answer
@dataclass
class Script:
    """What a fake answers, decided from the request as a model would: a choice (0, then 1), a tool
    call while no tool result came back, the tool's result restated, or text."""

    choices: Iterator[int]

    def answer(self, *, choice: bool, tool: str | None, tool_result: str | None, prompt: str) -> dict[str, Any]:
        if choice:
            return {"choice": next(self.choices)}
        if tool_result is not None:
            return {"text": f"The answer is {tool_result}."}
        if tool is not None:
            return {"call": (tool, {"expression": "6*7"})}
        return {"text": f"Done: {prompt[:20]}"}


USAGE = (10, 3)  # every answer's tokens: (prompt, completion)


def anthropic_respond(script: Script) -> Callable[[dict[str, Any]], Canned]:
    def respond(body: dict[str, Any]) -> Canned:
        forced = (body.get("tool_choice") or {}).get("name")
        last = body["messages"][-1]["content"]
        results = [b for b in last if b.get("type") == "tool_result"] if isinstance(last, list) else []
        tools = [t["name"] for t in body.get("tools") or []]
        text = last if isinstance(last, str) else "".join(b.get("text", "") for b in last)
        got = script.answer(choice=forced == "answer", tool=tools[0] if tools and not forced else None,
                            tool_result=results[0]["content"] if results else None, prompt=text)
        if "choice" in got:
            return Canned(calls=[("answer", got)], usage=USAGE)
        if "call" in got:
            return Canned(calls=[got["call"]], usage=USAGE)
        return Canned(text=got["text"], usage=USAGE)

    return respond


def gemini_respond(script: Script) -> Callable[[dict[str, Any]], Canned]:
    def respond(body: dict[str, Any]) -> Canned:
        config = body.get("generationConfig") or {}
        parts = body["contents"][-1]["parts"]
        results = [p["functionResponse"] for p in parts if "functionResponse" in p]
        tools = [d["name"] for t in body.get("tools") or [] for d in t.get("functionDeclarations", [])]
        got = script.answer(choice=config.get("responseMimeType") == "text/x.enum", tool=tools[0] if tools else None,
                            tool_result=results[0]["response"]["result"] if results else None,
                            prompt="".join(p.get("text", "") for p in parts))
        if "choice" in got:
            return Canned(text=str(got["choice"]), usage=USAGE)
        if "call" in got:
            return Canned(calls=[got["call"]], usage=USAGE)
        return Canned(text=got["text"], usage=USAGE)

    return respond


def openai_respond(script: Script) -> Callable[[dict[str, Any]], Reply]:
    def respond(request: dict[str, Any]) -> Reply:
        fmt = request.get("response_format") or {}
        last = request["messages"][-1]
        tools = [t["function"]["name"] for t in request.get("tools") or []]
        got = script.answer(choice=(fmt.get("json_schema") or {}).get("name") == "choice",
                            tool=tools[0] if tools else None,
                            tool_result=last["content"] if last["role"] == "tool" else None,
                            prompt=str(last.get("content") or ""))
        if "choice" in got:
            return Reply(text=json.dumps(got), usage=USAGE)
        if "call" in got:
            name, arguments = got["call"]
            call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            return Reply(text=None, tool_calls=[call], usage=USAGE)
        return Reply(text=got["text"], usage=USAGE)

    return respond


# ------------------------------------------------------------------------------------- the wires
MODELS = {
    "anthropic": "claude-sonnet-4-6", "claude": "claude-haiku-4-5", "gemini": "gemini-2.5-flash",
    "azure": "gpt-4o-mini", "ollama": "llama3.2", "deepseek": "deepseek-chat", "moonshot": "kimi-k2-0905-preview",
    "openrouter": "anthropic/claude-sonnet-4.5", "siliconflow": "Qwen/Qwen2.5-72B-Instruct",
    "mistral": "mistral-small-latest", "yi": "yi-lightning", "zhipuai": "glm-4.6", "dashscope": "qwen-plus",
    "fireworks": "accounts/fireworks/models/llama-v3p1-8b-instruct", "open_llm": "my-local-model",
}


class Wire:
    """One fake server, the config2.yaml ``llm:`` section pointing at it, and how to script errors."""

    def __init__(self, api_type: str, script: Script):
        self.api_type = api_type
        if api_type in ("anthropic", "claude"):
            self.fake: Any = FakeAnthropic(anthropic_respond(script), key=KEY).start()
            url = self.fake.url
        elif api_type == "gemini":
            self.fake = FakeGemini(gemini_respond(script), key=KEY).start()
            url = self.fake.url
        else:
            self.fake = FakeOpenAIServer(handler=openai_respond(script)).start()
            url = {"azure": self.fake.url.removesuffix("/v1"),  # the resource's endpoint
                   "ollama": self.fake.url.removesuffix("/v1") + "/api"}.get(api_type, self.fake.url)  # MetaGPT's
        self.llm: dict[str, Any] = {"api_type": api_type, "model": MODELS[api_type], "base_url": url,
                                    "api_key": KEY, "max_token": 256, "temperature": 0.0, "timeout": 10}
        if api_type == "azure":
            self.llm["api_version"] = "2024-10-21"
        if api_type == "ollama":
            del self.llm["api_key"]  # Ollama needs none

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.fake.bodies if hasattr(self.fake, "bodies") else self.fake.requests

    def push_error(self, status: int, *, then_ok: bool) -> None:
        headers = {"retry-after": "0"}
        if isinstance(self.fake, FakeOpenAIServer):
            kind = "rate_limit_exceeded" if status == 429 else "invalid_request_error"
            error = Reply(status=status, body=error_body(f"canned {status}", type_=kind), headers=headers)
            self.fake.push(*([error, Reply(text="recovered", usage=USAGE)] if then_ok else [error] * 5))
        else:
            error = Canned(status=status, headers=headers)
            self.fake.push(*([error, Canned(text="recovered", usage=USAGE)] if then_ok else [error] * 5))

    def stop(self) -> None:
        self.fake.stop()


API_TYPES = list(MODELS)


@pytest.fixture
def wire(request: pytest.FixtureRequest, tmp_path, monkeypatch) -> Iterator[Wire]:
    made = Wire(request.param, Script(iter([0, 1])))
    path = tmp_path / "config2.yaml"
    path.write_text(yaml.safe_dump({"llm": made.llm}))
    monkeypatch.setenv("ROLECAST_CONFIG", str(path))
    for variable in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ROLECAST_MODEL", "ROLECAST_PROVIDER"):
        monkeypatch.delenv(variable, raising=False)
    try:
        yield made
    finally:
        made.stop()


def expected_cost(model: str, calls: int) -> float:
    price = Context().cost_manager.price_of(model) or (0.0, 0.0)
    return calls * (USAGE[0] * price[0] + USAGE[1] * price[1]) / 1_000_000


@pytest.mark.parametrize("wire", API_TYPES, indirect=True)
async def test_a_metagpt_config2_runs_a_team_a_tool_loop_and_a_stream(wire: Wire):
    # a two-role team: Alice drafts (one call), Bob in react mode chooses twice and acts twice
    reviewer = Reviewer()
    team = Team(roles=[Planner(), reviewer])
    await team.run(idea="a CLI that adds two numbers", n_round=3)
    bob = [m for m in reviewer.get_memories() if m.sent_from == "Bob"]
    assert [m.cause_by.split(".")[-1] for m in bob] == ["Critique", "Polish"]  # states 0 then 1, as chosen
    assert team.env.history.get()[-1].content == "Done: Polish the plan."
    totals = team.cost_manager.total
    assert (totals.calls, totals.prompt_tokens, totals.completion_tokens) == (5, 50, 15)
    free = wire.api_type == "ollama"
    assert totals.cost == pytest.approx(0.0 if free else expected_cost(MODELS[wire.api_type], 5))

    # a native tool loop: the calculator's result goes back to the model, which restates it
    tools = Team(roles=[ToolAgent(tools=[calculator], style="function_calling")])
    await tools.run(idea="What is 6 times 7?", n_round=1)
    assert tools.env.history.get()[-1].content == "The answer is 42."
    assert tools.cost_manager.total.calls == 2

    # a stream, metered like any call
    context = Context()
    llm = context.llm()
    with context.scope("Streamer"):
        chunks = [chunk async for chunk in llm.stream("Say something")]
    assert "".join(chunks) == "Done: Say something" and len(chunks) > 1
    assert (context.cost_manager.total.prompt_tokens, context.cost_manager.total.completion_tokens) == USAGE
    check_wire(wire)
    store = Path(os.environ["ROLECAST_STORE"])  # the run log of both teams (and its journal, if any)
    written = [f for p in store.parent.glob(store.name + "*") for f in ([p] if p.is_file() else p.rglob("*"))]
    assert written and all(KEY.encode() not in f.read_bytes() for f in written if f.is_file())
    assert team.run_id and tools.run_id


def check_wire(wire: Wire) -> None:
    """What each wire's requests must have looked like."""
    if isinstance(wire.fake, FakeAnthropic):
        bodies = wire.fake.bodies
        assert all(isinstance(b["max_tokens"], int) for b in bodies) and any(b.get("system") for b in bodies)
        forced = [b for b in bodies if b.get("tool_choice")]  # the state choices: an enum, forced
        assert [b["tools"][0]["input_schema"]["properties"]["choice"]["enum"] for b in forced] == [[-1, 0, 1]] * 2
    elif isinstance(wire.fake, FakeGemini):
        bodies = wire.fake.bodies
        assert any(b.get("systemInstruction") for b in bodies)
        enums = [b["generationConfig"]["responseSchema"]["enum"] for b in bodies
                 if (b.get("generationConfig") or {}).get("responseMimeType") == "text/x.enum"]
        assert enums == [["-1", "0", "1"]] * 2
    else:
        requests = wire.fake.requests
        paths = {r["_path"].split("?")[0] for r in requests}
        if wire.api_type == "azure":
            assert paths == {"/openai/deployments/gpt-4o-mini/chat/completions"}
            assert all(r["_headers"]["api-key"] == KEY and "api-version=2024-10-21" in r["_path"] for r in requests)
        else:
            assert paths == {"/v1/chat/completions"}  # Ollama too: MetaGPT's /api, sent to its /v1
            key = "sk-no-key-required" if wire.api_type == "ollama" else KEY
            assert all(r["_headers"]["authorization"] == f"Bearer {key}" for r in requests)
        schemas = [r["response_format"]["json_schema"]["schema"] for r in requests if r.get("response_format")]
        assert [s["properties"]["choice"]["enum"] for s in schemas] == [[-1, 0, 1]] * 2


@pytest.mark.parametrize("wire", API_TYPES, indirect=True)
async def test_a_rate_limit_is_retried_and_a_bad_request_is_typed(wire: Wire):
    context = Context()
    llm = context.llm()
    wire.push_error(429, then_ok=True)
    with context.scope():
        assert await llm.ask("hello") == "recovered"
    assert (context.cost_manager.total.failed, context.cost_manager.total.calls) == (1, 1)  # the 429 counted
    asked = len(wire.requests)
    wire.push_error(400, then_ok=False)
    with pytest.raises(LLMAPIError) as caught, context.scope():
        await llm.ask("hello")
    assert caught.value.status_code == 400 and not isinstance(caught.value, LLMRateLimitError)
    assert len(wire.requests) == asked + 1  # not retried


# ------------------------------------------------------------------ the fakes, checked with the official SDKs
@pytest.fixture
def anthropic_fake() -> Iterator[FakeAnthropic]:
    fake = FakeAnthropic(lambda body: Canned(text="Hello from the fake", usage=(12, 5)), key=KEY).start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def gemini_fake() -> Iterator[FakeGemini]:
    fake = FakeGemini(lambda body: Canned(text="Hello from the fake", usage=(12, 5)), key=KEY).start()
    try:
        yield fake
    finally:
        fake.stop()


def test_the_anthropic_fake_answers_the_official_sdk_and_refuses_what_the_service_refuses(anthropic_fake):
    import anthropic

    client = anthropic.Anthropic(api_key=KEY, base_url=anthropic_fake.url, max_retries=0)
    message = client.messages.create(model="claude-sonnet-4-6", max_tokens=64, system="be brief",
                                     messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text == "Hello from the fake" and message.usage.input_tokens == 12
    with client.messages.stream(model="claude-sonnet-4-6", max_tokens=64,
                                messages=[{"role": "user", "content": "hi"}]) as stream:
        assert "".join(stream.text_stream) == "Hello from the fake"
        assert stream.get_final_message().usage.output_tokens == 5
    with pytest.raises(anthropic.BadRequestError, match="Unexpected role"):
        client.messages.create(model="claude-sonnet-4-6", max_tokens=64,
                               messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    with pytest.raises(anthropic.BadRequestError, match="non-empty"):
        client.messages.create(model="claude-sonnet-4-6", max_tokens=64,
                               messages=[{"role": "user", "content": [{"type": "text", "text": ""}]}])
    with pytest.raises(anthropic.BadRequestError, match="tool_result"):
        client.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {"role": "user", "content": "no result"}])
    anthropic_fake.push(Canned(status=529))
    with pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 529 and caught.value.body["error"]["type"] == "overloaded_error"
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(api_key="wrong", base_url=anthropic_fake.url, max_retries=0).messages.create(
            model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "x"}])


def test_the_gemini_fake_answers_the_official_sdk_and_refuses_what_the_service_refuses(gemini_fake):
    from google import genai
    from google.genai import errors

    client = genai.Client(api_key=KEY, http_options={"base_url": gemini_fake.url})
    response = client.models.generate_content(model="gemini-2.5-flash", contents="hi",
                                              config={"system_instruction": "be brief"})
    assert response.text == "Hello from the fake" and response.usage_metadata.prompt_token_count == 12
    streamed = client.models.generate_content_stream(model="gemini-2.5-flash", contents="hi")
    assert "".join(chunk.text or "" for chunk in streamed) == "Hello from the fake"
    with pytest.raises(errors.ClientError, match="empty text"):
        client.models.generate_content(model="gemini-2.5-flash",
                                       contents=[{"role": "user", "parts": [{"text": ""}]}])
    with pytest.raises(errors.ClientError, match="valid role"):
        client.models.generate_content(model="gemini-2.5-flash",
                                       contents=[{"role": "system", "parts": [{"text": "x"}]}])
    with pytest.raises(errors.ClientError, match="enum"):
        client.models.generate_content(model="gemini-2.5-flash", contents="pick", config={
            "response_mime_type": "text/x.enum", "response_schema": {"type": "INTEGER", "enum": ["0", "1"]}})
    embedded = client.models.embed_content(model="gemini-embedding-001", contents=["a", "b"])
    assert len(embedded.embeddings) == 2 and len(embedded.embeddings[0].values) == FakeGemini.dimensions
    gemini_fake.push(Canned(status=429))
    with pytest.raises(errors.ClientError) as caught:
        client.models.generate_content(model="gemini-2.5-flash", contents="hi")
    assert caught.value.code == 429 and caught.value.status == "RESOURCE_EXHAUSTED"


# ---------------------------------------------------------------------------- more of the seam, natively
class Verdict(BaseModel):
    verdict: str
    score: int


async def test_claude_structured_output_is_a_forced_tool_and_a_cut_stream_is_typed(anthropic_fake):
    from rolecast.llm.anthropic import AnthropicLLM

    llm = AnthropicLLM("claude-sonnet-4-6", api_key=KEY, base_url=anthropic_fake.url, retry_initial=0.01,
                       retry_jitter=0.0)
    anthropic_fake.push(Canned(calls=[("answer", {"verdict": "ok", "score": 3})]))
    assert await llm.structured("Judge it", Verdict, system_msgs=["You judge."]) == Verdict(verdict="ok", score=3)
    body = anthropic_fake.bodies[-1]
    assert body["tool_choice"] == {"type": "tool", "name": "answer"} and body["system"] == "You judge."
    assert body["tools"][0]["input_schema"]["properties"]["score"] == {"title": "Score", "type": "integer"}
    anthropic_fake.push(Canned(text="cut short here", cut=True))
    with pytest.raises(LLMIncompleteError) as caught:
        _ = [chunk async for chunk in llm.stream("hi")]
    assert caught.value.partial == "cut short here"
    anthropic_fake.push(Canned(status=529, headers={"retry-after": "0"}), Canned(text="after the overload"))
    assert await llm.ask("hi") == "after the overload"
    assert repr(llm) == "AnthropicLLM(model='claude-sonnet-4-6')"


async def test_gemini_structured_output_is_a_json_schema_and_embeddings_are_metered(gemini_fake):
    from rolecast.llm.gemini import GeminiLLM

    llm = GeminiLLM("gemini-2.5-flash", api_key=KEY, base_url=gemini_fake.url)
    gemini_fake.push(Canned(text='{"verdict": "ok", "score": 3}'))
    context = Context()
    with context.scope("Judge"):
        assert await llm.structured("Judge it", Verdict) == Verdict(verdict="ok", score=3)
        vectors = await llm.embed(["first text", "second text"], purpose="query")
    config = gemini_fake.bodies[-2]["generationConfig"]
    assert config["responseMimeType"] == "application/json" and config["responseJsonSchema"]["required"] == [
        "verdict", "score"]
    assert [r["taskType"] for r in gemini_fake.bodies[-1]["requests"]] == ["RETRIEVAL_QUERY"] * 2
    assert len(vectors) == 2 and vectors[0] != vectors[1]
    assert abs(sum(x * x for x in vectors[0]) - 1.0) < 1e-9
    assert context.cost_manager.total.calls == 2


async def test_a_claude_call_is_an_otel_span_with_gen_ai_system_anthropic(anthropic_fake):
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from rolecast.llm.anthropic import AnthropicLLM
    from rolecast.observe.tracing import instrument

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    llm = AnthropicLLM("claude-sonnet-4-6", api_key=KEY, base_url=anthropic_fake.url)
    team = Team(llm=llm, roles=[Planner()])
    instrument(team, provider)
    await team.run(idea="a plan", n_round=1)
    chat = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert [(s.attributes["gen_ai.system"], s.attributes["gen_ai.usage.input_tokens"]) for s in chat] == [
        ("anthropic", 12)]
    assert all(KEY not in str(dict(s.attributes)) for s in exporter.get_finished_spans())


async def test_claude_calls_keep_their_deadline_budget_and_the_requests_switch(anthropic_fake, monkeypatch):
    from rolecast.accounting.cost import CostManager
    from rolecast.errors import BudgetExceeded, LLMTimeoutError, ModelRequestsBlocked
    from rolecast.llm.anthropic import AnthropicLLM

    llm = AnthropicLLM("claude-opus-4-1", api_key=KEY, base_url=anthropic_fake.url, timeout=0.3, max_retries=1,
                       retry_initial=0.01, retry_jitter=0.0)
    anthropic_fake.push(Canned(text="late", delay=1.0), Canned(text="late", delay=1.0))
    with pytest.raises(LLMTimeoutError, match="after 2 attempts"):
        await llm.ask("hi")
    asked = len(anthropic_fake.requests)
    # a budget too small for the worst case (prompt + max_tokens at Opus 4.1's price) refuses before sending
    context = Context(cost_manager=CostManager(max_budget=0.001))
    with pytest.raises(BudgetExceeded), context.scope():
        await llm.ask("hi", settings={"max_tokens": 4096})
    monkeypatch.setenv("ROLECAST_ALLOW_MODEL_REQUESTS", "0")
    with pytest.raises(ModelRequestsBlocked):
        await llm.ask("hi")
    assert len(anthropic_fake.requests) == asked  # neither reached the server


async def test_gemini_settings_the_sdk_does_not_know_are_a_usage_error(gemini_fake):
    from rolecast.errors import UsageError
    from rolecast.llm.gemini import GeminiLLM

    llm = GeminiLLM("gemini-2.5-flash", api_key=KEY, base_url=gemini_fake.url)
    with pytest.raises(UsageError, match="refused the request's config"):
        await llm.ask("hi", settings={"extra": {"top_kk": 3}})
    assert await llm.ask("hi", settings={"extra": {"top_k": 3}}) == "Hello from the fake"
    assert gemini_fake.bodies[-1]["generationConfig"]["topK"] == 3


@pytest.mark.parametrize("which", ["claude", "gemini"])
async def test_a_native_model_closes_its_connections(which, anthropic_fake, gemini_fake):
    from rolecast.llm.anthropic import AnthropicLLM
    from rolecast.llm.gemini import GeminiLLM

    if which == "claude":
        llm: Any = AnthropicLLM("claude-sonnet-4-6", api_key=KEY, base_url=anthropic_fake.url)
    else:
        llm = GeminiLLM("gemini-2.5-flash", api_key=KEY, base_url=gemini_fake.url)
    assert await llm.ask("hi") == "Hello from the fake"
    await llm.aclose()
    assert llm._client is None
    assert await llm.ask("again") == "Hello from the fake"  # a new client on the next call
    await llm.aclose()


def test_rolecast_ask_streams_claude_into_the_console(anthropic_fake, tmp_path):
    import subprocess
    import sys

    path = tmp_path / "config2.yaml"
    path.write_text(yaml.safe_dump({"llm": {"api_type": "claude", "model": "claude-sonnet-4-6", "api_key": KEY,
                                            "base_url": anthropic_fake.url}}))
    root = Path(__file__).resolve().parent.parent
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(root), "ROLECAST_CONFIG": str(path),
           "ROLECAST_ALLOW_MODEL_REQUESTS": "1", "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "rolecast.cli", "ask", "hello"], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Hello from the fake\n" and anthropic_fake.bodies[-1]["stream"] is True
    assert KEY not in out.stdout + out.stderr


async def test_a_gemini_3_tool_loop_sends_each_calls_thought_signature_back(gemini_fake):
    from fake_providers import SIGNATURE

    from rolecast.llm.gemini import GeminiLLM

    gemini_fake.respond = gemini_respond(Script(iter([])))
    llm = GeminiLLM("gemini-3-pro-preview", api_key=KEY, base_url=gemini_fake.url)
    agent = ToolAgent(tools=[calculator], style="function_calling", llm=llm)
    reply = await agent.run("What is 6 times 7?")
    assert reply.content == "The answer is 42."
    history = gemini_fake.bodies[-1]["contents"]
    call = next(p for c in history for p in c["parts"] if "functionCall" in p)
    assert call["thoughtSignature"] == SIGNATURE and call["functionCall"]["name"] == "calculator"

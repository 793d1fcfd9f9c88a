"""The LLM seam's shared behaviour: strict choices, structured re-asks, streaming, settings, doubles."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from rolecast.context import Context
from rolecast.errors import InvalidChoice, OutputParseError, ScriptExhausted, UsageError
from rolecast.llm import Completion, LLMSettings, ToolCall, Usage, parse_choice, truncate_at_stop
from rolecast.testing import FunctionLLM, ScriptedLLM


@pytest.mark.parametrize(
    ("text", "n", "expected"),
    [("3", 4, 3), (" 3.\n", 4, 3), ("`10`", 12, 10), ("-1", 2, -1), ('"0"', 1, 0)],
)
def test_parse_choice_accepts_one_whole_number_in_range(text, n, expected):
    assert parse_choice(text, n) == expected


@pytest.mark.parametrize(
    ("text", "n"),
    [("stage 1 or 2", 3), ("I choose 2", 3), ("1.5", 3), ("", 3), ("3", 3), ("-2", 3), ("1 2", 3), ("10", 3)],
)
def test_parse_choice_never_picks_a_digit_out_of_prose(text, n):
    with pytest.raises(InvalidChoice) as info:
        parse_choice(text, n)
    assert info.value.raw == text and info.value.n_options == n


async def test_choose_with_zero_options_is_a_usage_error():
    with pytest.raises(UsageError):
        await ScriptedLLM(["0"]).choose("pick", 0)


class Point(BaseModel):
    x: int
    y: int


async def test_structured_reasks_with_the_validation_error_then_succeeds():
    llm = ScriptedLLM(['{"x": 1}', "```json\n{'x': 1, 'y': 2,}\n```"])
    point = await llm.structured("a point", Point)
    assert point == Point(x=1, y=2)
    # the schema went to the provider and into the prompt
    assert llm.calls[0].structured is not None and llm.calls[0].structured.schema["title"] == "Point"
    assert '"required": ["x", "y"]' in llm.calls[0].prompt
    # the second call carried the first answer and the error
    second = llm.calls[1].messages
    assert second[-2] == {"role": "assistant", "content": '{"x": 1}'}
    assert "y" in second[-1]["content"] and "invalid" in second[-1]["content"]


async def test_structured_runs_a_custom_validator_and_gives_up_with_the_raw_answer():
    def must_be_origin(p: Point) -> None:
        if (p.x, p.y) != (0, 0):
            raise ValueError("the point must be the origin")

    llm = ScriptedLLM(['{"x": 1, "y": 1}'] * 3)
    with pytest.raises(OutputParseError) as info:
        await llm.structured("origin", Point, validate=must_be_origin, retries=2)
    assert info.value.raw == '{"x": 1, "y": 1}'
    assert "origin" in str(info.value)
    assert "must be the origin" in llm.calls[2].messages[-1]["content"]


async def test_stream_yields_chunks_and_records_usage_once():
    ctx = Context()
    llm = ScriptedLLM(["hello world"])
    with ctx.scope(role="R"):
        chunks = [c async for c in llm.stream("hi")]
    assert "".join(chunks) == "hello world"
    assert ctx.cost_manager.by_role["R"].calls == 1
    assert ctx.cost_manager.by_role["R"].completion_tokens > 0


async def test_settings_merge_and_reach_the_provider():
    llm = ScriptedLLM(["ok"])
    llm.settings = LLMSettings(temperature=0.2, max_tokens=100)
    await llm.ask("hi", settings={"max_tokens": 5, "seed": 7})
    s = llm.calls[0].settings
    assert (s.temperature, s.max_tokens, s.seed) == (0.2, 5, 7)


async def test_system_messages_come_first():
    llm = ScriptedLLM(["ok"])
    await llm.ask("question", ["be brief", "be kind"])
    assert [m["role"] for m in llm.calls[0].messages] == ["system", "system", "user"]


async def test_doubles_cut_at_stop_sequences_like_a_server():
    assert truncate_at_stop("a\nObservation: b", ["\nObservation:"]) == "a"
    llm = ScriptedLLM(["Thought: x\nAction: y\nObservation: made up"])
    assert await llm.ask("q", stop=["\nObservation:"]) == "Thought: x\nAction: y"


async def test_scripted_llm_raises_when_called_too_often_and_reports_unused_replies():
    llm = ScriptedLLM(["one", "two"])
    assert await llm.ask("a") == "one"
    with pytest.raises(AssertionError, match="1 scripted replies unused"):
        llm.assert_complete()
    await llm.ask("b")
    llm.assert_complete()
    with pytest.raises(ScriptExhausted):
        await llm.ask("c")


async def test_scripted_llm_replays_exceptions_completions_and_callables():
    call = ToolCall(id="1", name="add", arguments='{"a": 1}')
    llm = ScriptedLLM([
        RuntimeError("server on fire"),
        Completion(text="", tool_calls=[call], usage=Usage(10, 2)),
        lambda messages: messages[-1]["content"].upper(),
    ])
    with pytest.raises(RuntimeError):
        await llm.ask("x")
    completion = await llm.complete([{"role": "user", "content": "x"}], tools=[{"type": "function"}])
    assert completion.tool_calls == [call] and completion.usage.prompt_tokens == 10
    assert await llm.ask("shout") == "SHOUT"


async def test_function_llm_gets_the_call_when_it_asks_for_it():
    seen = []

    async def fn(messages, call):
        seen.append(call.kind)
        return "1"

    llm = FunctionLLM(fn)
    assert await llm.choose("pick", 3) == 1
    assert seen == ["choose"]


async def test_tools_on_a_provider_without_tool_support_are_refused():
    from rolecast.llm.base import BaseLLM

    class Plain(BaseLLM):
        reaches_a_model = False  # a test double

        async def _complete(self, messages, *, stop, settings, structured=None, tools=None):
            return Completion("x")

    with pytest.raises(UsageError, match="tool"):
        await Plain("plain").complete([{"role": "user", "content": "x"}], tools=[{"type": "function"}])

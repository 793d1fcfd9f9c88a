"""OpenTelemetry traces: the span tree of a real team run, read back from the SDK's in-memory exporter."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from actions import Action, calculator
from environment import Team
from rolecast.llm.base import Completion, ToolCall
from rolecast.store import LLM_CALL
from rolecast.testing import ScriptedLLM
from rolecast.tracing import instrument
from roles import Role, ToolAgent


@pytest.fixture
def exporter():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    exporter.provider = provider
    return exporter


def tree(spans) -> dict[str, str | None]:
    """Each span's name → its parent's name."""
    by_id = {s.context.span_id: s for s in spans}
    return {s.name: (by_id[s.parent.span_id].name if s.parent else None) for s in spans}


async def test_a_tool_agent_run_is_traced_run_round_turn_action_tool(exporter):
    llm = ScriptedLLM([
        Completion(text="", tool_calls=[ToolCall("c1", "calculator", '{"expression": "6 * 7"}')]),
        Completion(text="42"),
    ])
    team = Team(llm=llm, store=None)
    team.hire([ToolAgent(name="Calc", tools=[calculator], style="function_calling")])
    instrument(team, exporter.provider)
    await team.run(n_round=2, idea="what is 6*7?")

    spans = exporter.get_finished_spans()
    parents = tree(spans)
    assert parents["run Team"] is None
    assert parents["round 1"] == "run Team"
    assert parents["turn Calc"] == "round 1"
    assert parents["action FunctionCallingAction"] == "turn Calc"
    assert parents["execute_tool calculator"] == "action FunctionCallingAction"
    tool = next(s for s in spans if s.name == "execute_tool calculator")
    assert tool.attributes["gen_ai.tool.name"] == "calculator"
    assert tool.attributes["rolecast.tool.result"] == "42"
    run = next(s for s in spans if s.name == "run Team")
    assert run.attributes["rolecast.run_id"] == team.run_id
    assert run.attributes["rolecast.stop_reason"] == "idle"
    # the turn carries the id of the message it published
    turn = next(s for s in spans if s.name == "turn Calc")
    answer = team.env.history.get()[-1]
    assert answer.content == "42" and turn.attributes["rolecast.message.id"] == answer.id
    assert any(e.attributes["rolecast.message.id"] == answer.id for e in turn.events)
    # every span is closed inside its parent
    by_id = {s.context.span_id: s for s in spans}
    for s in spans:
        if s.parent:
            parent = by_id[s.parent.span_id]
            assert parent.start_time <= s.start_time and s.end_time <= parent.end_time, s.name


async def test_a_model_call_event_becomes_a_genai_chat_span_under_its_action(exporter):
    class Ask(Action):
        async def run(self, *args):
            log = self.context.run_log
            log.record_call("Ada", {
                "action": "Ask", "model": "gpt-4o-mini", "fingerprint": "f", "request": {},
                "response": {"text": "hi"}, "usage": {"prompt_tokens": 12, "completion_tokens": 3},
                "cost": 0.00042, "latency": 0.25, "attempt": 1,
            })
            return "hi"

    team = Team(llm=ScriptedLLM([]), store=None)
    team.hire([Role(name="Ada", actions=[Ask()])])
    instrument(team, exporter.provider)
    events = []
    team.run_log.subscribe(lambda e: events.append(e.kind))
    await team.run(n_round=1, idea="hello")

    assert LLM_CALL in events
    spans = {s.name: s for s in exporter.get_finished_spans()}
    chat = spans["chat gpt-4o-mini"]
    assert tree(exporter.get_finished_spans())["chat gpt-4o-mini"] == "action Ask"
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 12
    assert chat.attributes["gen_ai.usage.output_tokens"] == 3
    assert chat.attributes["rolecast.cost"] == pytest.approx(0.00042)
    assert (chat.end_time - chat.start_time) == pytest.approx(0.25e9, rel=1e-3)


async def test_a_failing_turn_marks_its_spans_as_errors(exporter):
    class Boom(Action):
        async def run(self, *args):
            raise ZeroDivisionError("no")

    team = Team(llm=ScriptedLLM([]), store=None)
    team.hire([Role(name="Eve", actions=[Boom()])])
    instrument(team, exporter.provider)
    with pytest.raises(Exception):  # noqa: B017 - the team stops on the role's ActionFailed
        await team.run(n_round=1, idea="go")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["turn Eve"].status.status_code is StatusCode.ERROR
    assert spans["action Boom"].status.status_code is StatusCode.ERROR
    assert spans["run Team"].status.status_code is StatusCode.ERROR
    assert spans["run Team"].attributes["rolecast.stop_reason"].startswith("error")

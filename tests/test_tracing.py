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
from rolecast.observe.tracing import instrument
from rolecast.runs.store import LLM_CALL
from rolecast.testing import ScriptedLLM
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


async def test_a_model_call_becomes_a_genai_chat_span_under_its_action(exporter):
    class Ask(Action):
        async def run(self, *args):
            return await self._aask("say hi")

    llm = ScriptedLLM(["hi there"], model="gpt-4o-mini")  # a priced model: the call costs something
    team = Team(llm=llm, store=None)
    team.hire([Role(name="Ada", actions=[Ask()])])
    instrument(team, exporter.provider)
    events = []
    team.run_log.subscribe(lambda e: events.append(e.kind))
    await team.run(n_round=1, idea="hello")

    assert LLM_CALL in events
    spans = exporter.get_finished_spans()
    chat = next(s for s in spans if s.name == "chat gpt-4o-mini")
    assert tree(spans)["chat gpt-4o-mini"] == "action Ask"
    totals = team.cost_manager.by_role["Ada"]
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert chat.attributes["gen_ai.usage.input_tokens"] == totals.prompt_tokens > 0
    assert chat.attributes["gen_ai.usage.output_tokens"] == totals.completion_tokens > 0
    assert chat.attributes["rolecast.cost"] == pytest.approx(totals.cost) and totals.cost > 0
    assert chat.attributes["rolecast.role"] == "Ada" and chat.attributes["rolecast.action"] == "Ask"


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

"""The seam's re-ask primitive (ask_valid), metering, and the mapping of provider exceptions."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel

from rolecast.accounting.cost import CostManager
from rolecast.accounting.metering import Meter, current_meter, default_cost_manager, metered
from rolecast.context import Context, current_scope
from rolecast.errors import (
    BudgetExceeded,
    ConfigError,
    LLMAPIError,
    OutputParseError,
    PlanParseError,
    UsageError,
)
from rolecast.llm.exceptions import llama_error, llama_load_errors, map_exceptions
from rolecast.testing import ScriptedLLM


# ------------------------------------------------------------------ ask_valid
def parse_number(text: str) -> int:
    if not text.strip().isdigit():
        raise ValueError(f"{text!r} is not a number")
    return int(text)


async def test_ask_valid_returns_the_first_answer_that_parses() -> None:
    llm = ScriptedLLM(["42"])
    assert await llm.ask_valid("a number", parse_number) == 42
    assert len(llm.calls) == 1


async def test_ask_valid_sends_the_bad_answer_and_the_fix_then_asks_again() -> None:
    llm = ScriptedLLM(["forty-two", "42"])
    value = await llm.ask_valid(
        "a number", parse_number, fix="Wrong: {error}. Digits only.", system_msgs=["be exact"], stop=["\n"],
    )
    assert value == 42
    second = llm.calls[1]
    assert second.messages[0] == {"role": "system", "content": "be exact"}
    assert second.messages[-2] == {"role": "assistant", "content": "forty-two"}
    assert second.messages[-1] == {"role": "user", "content": "Wrong: 'forty-two' is not a number. Digits only."}
    assert second.stop == ["\n"]


async def test_ask_valid_gives_up_with_the_last_answer_and_every_error() -> None:
    llm = ScriptedLLM(["one", "two", "three"])
    with pytest.raises(OutputParseError) as info:
        await llm.ask_valid("a number", parse_number, tries=3)
    assert info.value.raw == "three"
    assert info.value.errors == ["'one' is not a number", "'two' is not a number", "'three' is not a number"]
    assert "3 attempts" in str(info.value)
    llm.assert_complete()


async def test_ask_valid_retries_plan_parse_errors_and_validation_errors() -> None:
    class Step(BaseModel):
        name: str

    def parse(text: str) -> Step:
        if text.startswith("<"):
            raise PlanParseError("not a plan", raw=text)
        return Step.model_validate(json.loads(text))

    llm = ScriptedLLM(["<plan>", '{"nome": "x"}', '{"name": "x"}'])
    assert await llm.ask_valid("plan", parse) == Step(name="x")
    assert "name" in llm.calls[2].messages[-1]["content"]  # pydantic's message went back


async def test_ask_valid_lets_other_errors_through_and_needs_a_try() -> None:
    def boom(text: str) -> int:
        raise KeyError(text)

    with pytest.raises(KeyError):
        await ScriptedLLM(["x"]).ask_valid("q", boom)
    with pytest.raises(UsageError):
        await ScriptedLLM([]).ask_valid("q", parse_number, tries=0)


async def test_every_try_of_ask_valid_is_metered_and_the_budget_stops_it() -> None:
    ctx = Context(cost_manager=CostManager())
    llm = ScriptedLLM(["x", "y", "1"])
    with ctx.scope("Ann"):
        await llm.ask_valid("n", parse_number)
    assert ctx.cost_manager.by_role["Ann"].calls == 3

    priced = ScriptedLLM(["x", "1"], model="gpt-4o")
    with metered(CostManager(max_budget=0.0), "Bea"), pytest.raises(BudgetExceeded):
        await priced.ask_valid("n", parse_number)
    assert priced.calls == []


async def test_structured_goes_through_ask_valid() -> None:
    class Point(BaseModel):
        x: int

    llm = ScriptedLLM(["nope", "still nope"])
    with pytest.raises(OutputParseError) as info:
        await llm.structured("p", Point, retries=1)
    assert info.value.raw == "still nope" and len(info.value.errors) == 2


# -------------------------------------------------------------------- metering
def test_outside_any_scope_the_process_wide_cost_manager_pays() -> None:
    meter = current_meter()
    assert meter.cost_manager is default_cost_manager() and meter.role is None
    from rolecast.context import default_context

    assert default_context().cost_manager is default_cost_manager()


async def test_metered_charges_calls_to_its_cost_manager_and_role() -> None:
    cm = CostManager()
    with metered(cm, "Cy") as meter:
        assert current_meter() == meter == Meter(cm, "Cy")
        await ScriptedLLM(["ok"]).ask("hi")
    assert cm.by_role["Cy"].calls == 1
    assert current_meter().cost_manager is default_cost_manager()


async def test_context_scope_sets_the_scope_and_the_meter_and_tasks_inherit_them() -> None:
    ctx = Context()
    llm = ScriptedLLM(["a", "b"])
    with ctx.scope("Dee"):
        assert current_scope().context is ctx and current_meter().cost_manager is ctx.cost_manager
        await asyncio.gather(llm.ask("1"), llm.ask("2"))
    assert ctx.cost_manager.by_role["Dee"].calls == 2


def test_meter_fields_have_defaults_so_it_can_grow() -> None:
    cm = CostManager()
    assert Meter(cm) == Meter(cm, None)


# ----------------------------------------------------------- exception mapping
def test_map_exceptions_picks_the_most_specific_type_and_chains() -> None:
    mapping = {
        LookupError: lambda exc: LLMAPIError(f"lookup: {exc}"),
        KeyError: lambda exc: ConfigError(f"key: {exc}"),
    }
    with pytest.raises(ConfigError, match="key") as info, map_exceptions(mapping):
        raise KeyError("k")
    assert isinstance(info.value.__cause__, KeyError)
    with pytest.raises(LLMAPIError, match="lookup"), map_exceptions(mapping):
        raise IndexError("i")
    with pytest.raises(TypeError), map_exceptions(mapping):
        raise TypeError("not mapped")


def test_llama_mappings() -> None:
    refused = llama_error({"code": 400, "message": "request (9031 tokens) exceeds the available context size",
                           "type": "exceed_context_size_error"})
    assert isinstance(refused, LLMAPIError) and refused.status_code == 400
    assert "the local model rejected the request: request (9031 tokens)" in str(refused)
    assert isinstance(llama_error({"code": 400, "message": "failed to parse grammar"}), UsageError)
    with pytest.raises(ConfigError, match=r"could not load the GGUF model /m\.gguf"), llama_load_errors("/m.gguf"):
        raise OSError("bad file")

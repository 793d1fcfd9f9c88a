"""Every parser of model output (and of saved data) against hostile input.

Each parser must finish in time linear in its input and fail only with a
:class:`~rolecast.errors.RolecastError`. Two kinds of test:

* the crafted inputs of issue 10 (each took seconds, or crashed with an untyped
  error, before), each under a time bound;
* hypothesis properties over every parser: a few hundred examples in the default
  run, 10,000 each with ``pytest -m fuzz`` (the nightly run).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from actions import Action
from actions.loops import AgentAction, AgentFinish, ReActOutputParser
from actions.loops.stepwise import StepwiseStep, parse_stepwise
from actions.plan_and_act import Plan, PlanRunner, Task
from actions.semantic_kernel.planners.sequential import parse_sequential_plan, repair_plan_xml
from actions.tools import FunctionRegistry, arguments_from_text, json_arguments, tool
from memory import InstructContent, Memory, Message, allow_instruct_modules, register_instruct_model
from rolecast.context import Context
from rolecast.core.jsonutil import MAX_JSON_DEPTH, extract_json, loads_lenient
from rolecast.core.output_parser import OutputParser
from rolecast.errors import (
    DataError,
    InvalidChoice,
    OutputParseError,
    PlanError,
    PlanParseError,
    RolecastError,
    ToolError,
)
from rolecast.llm import parse_choice
from rolecast.testing import ScriptedLLM
from roles import Role

#: generous: each crafted input took 5-15 s (or minutes, at these sizes) before the fix and takes
#: milliseconds now; the bound only has to tell the two apart on a loaded machine
BOUND_S = 2.0

FEW = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MANY = settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def within(seconds: float = BOUND_S) -> Iterator[None]:
    began = time.perf_counter()
    yield
    took = time.perf_counter() - began
    assert took < seconds, f"took {took:.2f}s"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def shout(text: str) -> str:
    """Shout the text."""
    return text.upper()


REGISTRY = FunctionRegistry.of(add, shout)


# ------------------------------------------------------------- crafted inputs
def test_choice_with_a_long_run_of_spaces_fails_fast() -> None:
    with within(), pytest.raises(InvalidChoice):
        parse_choice("1" + " " * 200_000 + "x", 3)


def test_choice_with_more_digits_than_python_converts_is_an_invalid_choice() -> None:
    with pytest.raises(InvalidChoice):
        parse_choice("1" * 4301, 3)
    with pytest.raises(InvalidChoice):
        parse_choice("9" * 7, 10**8)  # more digits than any real number of options


DEEP_LIST = "[" * 5000 + "]" * 5000
DEEP_OBJECT = '{"a":' * 5000 + "1" + "}" * 5000


@pytest.mark.parametrize("text", [DEEP_LIST, DEEP_OBJECT, "x " + DEEP_OBJECT + " y"], ids=["list", "object", "prose"])
def test_deep_json_is_an_output_parse_error(text: str) -> None:
    with within(), pytest.raises(OutputParseError, match="nested deeper"):
        extract_json(text)


def test_json_at_the_nesting_limit_still_parses() -> None:
    depth = MAX_JSON_DEPTH
    assert extract_json("[" * depth + "]" * depth) is not None
    assert loads_lenient("{a:" * (depth - 1) + "[1,]" + "}" * (depth - 1)) is not None


async def test_deep_json_through_structured_is_an_output_parse_error() -> None:
    class Point(BaseModel):
        x: int

    llm = ScriptedLLM([DEEP_OBJECT] * 3)
    with Context(llm=llm).scope(), pytest.raises(OutputParseError):
        await llm.structured("a point", Point)


def test_deep_react_action_input_is_a_parse_error_for_the_model() -> None:
    parsed = ReActOutputParser().parse("Thought: t\nAction: add\nAction Input: " + DEEP_OBJECT)
    assert isinstance(parsed, AgentAction)
    with pytest.raises(OutputParseError):
        arguments_from_text(REGISTRY.get("add"), str(parsed.tool_input))


def test_deep_stepwise_action_becomes_an_observation() -> None:
    step = parse_stepwise("[THOUGHT] go\n[ACTION]" + DEEP_OBJECT)
    assert "invalid JSON" in step.observation and not step.action


def test_many_stepwise_action_markers_parse_in_linear_time() -> None:
    with within():
        step = parse_stepwise("[ACTION]" * 200_000 + "{")
    assert step.observation


def test_exponential_repair_input_is_linear_now() -> None:
    text = "<function.x a=" + "aaa=" * 5000 + "<"  # 111 characters of this took 8.6 s
    with within(), pytest.raises(PlanParseError):
        parse_sequential_plan(text, "goal", REGISTRY)


def test_many_plan_openings_parse_in_linear_time() -> None:
    with within():
        plan = parse_sequential_plan("<plan>" * 30_000, "goal", REGISTRY)  # 16,000 took 6 s
    assert plan.steps == []


@pytest.mark.parametrize(
    "text",
    ["<plan" * 30_000, "<!--" * 50_000 + "<function.add a=1 b=2/>", '<function.add a="' * 30_000],
    ids=["unclosed-plans", "unclosed-comments", "unclosed-quotes"],
)
def test_unclosed_constructs_parse_in_linear_time(text: str) -> None:
    with within():
        try:
            parse_sequential_plan(text, "goal", REGISTRY)
        except PlanParseError:
            pass


@pytest.mark.parametrize("ref", ["&#1114112;", "&#xD800;", "&#0;", "&#" + "9" * 5000 + ";"])
def test_character_references_xml_cannot_hold_are_kept_as_text(ref: str) -> None:
    plan = parse_sequential_plan(f'<plan><function.shout text="{ref}!"/>', "goal", REGISTRY)
    assert plan.steps[0].parameters == {"text": ref + "!"}


def test_valid_character_references_are_decoded_in_repair() -> None:
    assert '"A😀"' in repair_plan_xml('<function.a.b x="&#65;&#x1F600;"/>')


def test_entity_declarations_are_refused_and_repaired_around() -> None:
    answer = '<!DOCTYPE plan [<!ENTITY a "b">]><plan><function.shout text="&a;"/></plan>'
    plan = parse_sequential_plan(answer, "goal", REGISTRY)  # defusedxml refuses; repair reads the tag
    assert [s.function for s in plan.steps] == ["shout"] or plan.steps[0].name.endswith("shout")


# ------------------------------------------------------------ saved messages
def test_message_data_never_decides_what_is_imported() -> None:
    sys.modules.pop("this", None)
    restored = Message.from_json('{"instruct_content": {"class": "this.X", "value": {"k": 1}}}')
    assert "this" not in sys.modules
    assert isinstance(restored.instruct_content, InstructContent)
    assert restored.instruct_content.model_dump() == {"k": 1}
    # saved again, it names the class it was saved as: nothing is lost
    assert json.loads(restored.to_json())["instruct_content"] == {"class": "this.X", "value": {"k": 1}}


@pytest.mark.parametrize(
    "instruct",
    [
        {"class": "a.B", "value": [1]},
        {"class": 3, "value": {}},
        {"class": "a.B", "value": "text"},
        7,
    ],
)
def test_malformed_instruct_content_is_a_data_error(instruct: Any) -> None:
    with pytest.raises(DataError):
        Message.from_json(json.dumps({"content": "x", "instruct_content": instruct}))


@pytest.mark.parametrize("value", [{"model_config": 1}, {"_private": 2}, {"__class__": 3}, {"": 4}])
def test_odd_field_names_stay_values(value: dict[str, Any]) -> None:
    restored = Message.from_json(json.dumps({"instruct_content": {"class": "a.B", "value": value}}))
    assert isinstance(restored.instruct_content, InstructContent)
    assert restored.instruct_content.model_dump() == value


@pytest.mark.parametrize("text", ["not json", "[1]", '{"content": ' * 300 + "1" + "}" * 300, '{"id": []}'])
def test_malformed_message_json_is_a_data_error(text: str) -> None:
    with pytest.raises(DataError):
        Message.from_json(text)


def test_malformed_memory_json_is_a_data_error() -> None:
    for text in ["{}", "[1]", "nope"]:
        with pytest.raises(DataError):
            Memory.from_json(text)


class Sealed(BaseModel):
    n: int


def test_registered_and_allowed_classes_are_rebuilt() -> None:
    data = json.dumps({"instruct_content": {"class": f"{__name__}.Sealed", "value": {"n": 1}}})
    register_instruct_model(Sealed)
    assert isinstance(Message.from_json(data).instruct_content, Sealed)
    with pytest.raises(DataError):  # a registered class validates its values
        Message.from_json(data.replace('{"n": 1}', '{"n": "x"}'))


def test_an_allowed_module_is_imported_only_for_a_pydantic_model() -> None:
    allow_instruct_modules("rolecast.core.settings")
    rebuilt = Message.from_json('{"instruct_content": {"class": "rolecast.core.settings.LLMSettings", "value": {}}}')
    assert type(rebuilt.instruct_content).__name__ == "LLMSettings"
    not_a_model = Message.from_json('{"instruct_content": {"class": "rolecast.core.settings.Any", "value": {}}}')
    assert isinstance(not_a_model.instruct_content, InstructContent)


# ----------------------------------------------------------- plans entering
class Step(Action):
    async def run(self, history: list[Message]) -> str:  # type: ignore[override]
        return "done"


def _role() -> Role:
    llm = ScriptedLLM([])
    role = Role(name="r", llm=llm, actions=[Step(name="Step")], react_mode="plan_and_act")
    role.set_context(Context(llm=llm))
    return role


def _plan(*tasks: tuple[str, list[str], str]) -> Plan:
    return Plan(
        goal="g", tasks=[Task(task_id=i, dependent_task_ids=d, instruction="do", action=a) for i, d, a in tasks]
    )


@pytest.mark.parametrize(
    "plan",
    [
        _plan(("1", ["1"], "Step")),
        _plan(("1", ["2"], "Step"), ("2", ["1"], "Step")),
        _plan(("1", ["9"], "Step")),
        _plan(("1", [], "Step"), ("1", [], "Step")),
    ],
    ids=["self", "cycle", "unknown-dep", "duplicate"],
)
def test_resume_from_an_invalid_plan_is_a_plan_error(plan: Plan) -> None:
    with pytest.raises(PlanError):
        PlanRunner().resume_from(plan)


async def test_a_resumed_plan_with_an_unknown_action_is_a_plan_error() -> None:
    role = _role()
    role.planner.resume_from(_plan(("1", [], "Nope")))
    with pytest.raises(PlanError, match="unknown action"):
        await role.run("g")


async def test_an_invalid_checkpoint_is_a_plan_error_before_anything_runs(tmp_path: Path) -> None:
    checkpoint = tmp_path / "plan.json"
    checkpoint.write_text(_plan(("1", ["1"], "Step")).model_dump_json())
    role = _role()
    role.planner = PlanRunner(checkpoint=checkpoint)
    with pytest.raises(PlanError, match="depends on itself"):
        await role.run("g")


@pytest.mark.parametrize("text", ["{", "[]", '{"goal": 1}', "\xff"])
def test_an_unreadable_checkpoint_is_a_data_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "plan.json"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(DataError):
        Plan.load(path)


def test_a_cyclic_plan_that_skipped_validation_orders_into_a_plan_error() -> None:
    with pytest.raises(PlanError):
        _plan(("1", ["2"], "Step"), ("2", ["1"], "Step")).ordered()


@pytest.mark.parametrize("text", [
    "```" * 100_000,  # MetaGPT's parse_code regex retried at every fence
    "```python" + " x" * 100_000,  # and its parse_python_code regex backtracked over each space
    "[" * 100_000 + "]" * 100_000,  # too deep for ast.literal_eval's recursion
    "x = [" + "1, " * 20_000 + "]",
    "## a\n" * 50_000,
], ids=["fences", "python-fence", "deep", "long-list", "blocks"])  # fmt: skip
def test_output_parser_is_linear_and_bounded(text: str) -> None:
    for parse in (OutputParser.parse_code, OutputParser.parse_python_code, OutputParser.parse_data,
                  lambda t: OutputParser.extract_struct(t, list), OutputParser.parse_file_list):
        with within():
            _never_untyped(lambda p=parse: p(text), OutputParseError)  # type: ignore[misc]


def test_output_parser_never_evaluates_the_answer() -> None:
    with pytest.raises(OutputParseError):
        OutputParser.extract_struct("{'a': __import__('os').system('echo pwned')}", dict)
    with pytest.raises(OutputParseError):
        OutputParser.parse_file_list("files = [open('/etc/passwd').read()]")


# ------------------------------------------------------------ hypothesis
FRAGMENTS = [
    "{", "}", "[", "]", '"', "'", "\\", ":", ",", " ", "\n", "1", "-1", "0x1F", ".5", "true", "null", "NaN",
    "a", "//", "/*", "*/", "```", "```json\n", "Thought:", "\nAction:", "\nAction Input:", "\nObservation:",
    "Final Answer:", "[THOUGHT]", "[ACTION]", "[OBSERVATION]", "[FINAL ANSWER]", '{"action": "add"',
    '"action_variables": {', "<plan>", "</plan>", "<plan/>", "<function.add", "<function.shout", " a=", "b=",
    '="', "'", "/>", ">", "<!--", "-->", "&#", "&#x", "&amp;", ";", "&", "<", "`", ".",
]  # fmt: skip
hostile_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4)), max_size=40
).map("".join)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


def _never_untyped(parse: Callable[[], Any], *allowed: type[RolecastError]) -> Any:
    try:
        return parse()
    except allowed:
        return None


def _choice(text: str) -> None:
    value = _never_untyped(lambda: parse_choice(text, 5), InvalidChoice)
    assert value is None or -1 <= value < 5


def _json(text: str) -> None:
    _never_untyped(lambda: loads_lenient(text), OutputParseError)
    _never_untyped(lambda: extract_json(text), OutputParseError)
    _never_untyped(lambda: json_arguments(text), OutputParseError)


def _json_round_trip(value: Any, prose: str) -> None:
    text = json.dumps(value)
    assert loads_lenient(text) == value
    if isinstance(value, dict):
        assert extract_json(f"{prose.replace('{', '')}\n```json\n{text}\n```", expect=dict) == value


def _react(text: str) -> None:
    parsed = _never_untyped(lambda: ReActOutputParser().parse(text), OutputParseError)
    assert parsed is None or isinstance(parsed, (AgentAction, AgentFinish))
    if isinstance(parsed, AgentAction):
        for name in ("add", "shout"):
            _never_untyped(lambda n=name: arguments_from_text(REGISTRY.get(n), str(parsed.tool_input)),  # type: ignore[misc]
                           OutputParseError, ToolError)  # fmt: skip


def _stepwise(text: str) -> None:
    step = parse_stepwise(text)  # never raises: problems become the observation
    assert isinstance(step, StepwiseStep)
    assert step.action or step.final_answer or step.thought or step.observation


def _sequential(text: str) -> None:
    for missing in (False, True):
        _never_untyped(
            lambda m=missing: parse_sequential_plan(text, "g", REGISTRY, allow_missing_functions=m),  # type: ignore[misc]
            PlanParseError,
        )


def _message(class_path: str, value: Any, extra: Any) -> None:
    before = set(sys.modules)
    data = {"content": "x", "instruct_content": {"class": class_path, "value": value}, "metadata": extra}
    message = _never_untyped(lambda: Message.from_json(json.dumps(data)), DataError)
    assert set(sys.modules) == before  # nothing imported because the data said so
    if message is not None:
        assert Message.from_json(message.to_json()).instruct_content == message.instruct_content


def _output_parser(text: str) -> None:
    """MetaGPT's OutputParser: every method on any text, an answer or an OutputParseError."""
    for parse in (
        OutputParser.parse_blocks, OutputParser.parse_code, OutputParser.parse_str, OutputParser.parse_file_list,
        OutputParser.parse_python_code, OutputParser.parse_data, OutputParser.extract_content,
        lambda t: OutputParser.parse_data_with_mapping(t, {"a": list[str]}),
        lambda t: OutputParser.extract_struct(t, list), lambda t: OutputParser.extract_struct(t, dict),
    ):
        _never_untyped(lambda p=parse: p(text), OutputParseError)  # type: ignore[misc]


def _plan_json(text: str, tmp: Path) -> None:
    tmp.write_text(text, encoding="utf-8")
    plan = _never_untyped(lambda: Plan.load(tmp), DataError)
    if plan is not None:
        _never_untyped(lambda: PlanRunner().resume_from(plan), PlanError)


plan_texts = st.builds(
    lambda tasks: json.dumps({"goal": "g", "tasks": tasks}),
    st.lists(
        st.fixed_dictionaries(
            {
                "task_id": st.sampled_from(["1", "2", "3"]),
                "dependent_task_ids": st.lists(st.sampled_from(["1", "2", "3", "4"]), max_size=3),
                "instruction": st.just("do"),
                "action": st.sampled_from(["Step", "Other"]),
            }
        ),
        max_size=4,
    ),
) | hostile_text
class_paths = st.sampled_from(["this.X", "os.system", "a.B", "", "builtins.object", f"{__name__}.Sealed"]) | st.text(
    max_size=12
)


@pytest.mark.parametrize("budget", [pytest.param(FEW, id="few"), pytest.param(MANY, id="many", marks=pytest.mark.fuzz)])
def test_every_parser_fails_only_with_typed_errors(budget: settings, tmp_path: Path) -> None:
    plan_file = tmp_path / "plan.json"
    checks: list[Callable[[], None]] = [
        budget(given(hostile_text)(_choice)),
        budget(given(hostile_text)(_json)),
        budget(given(json_values, hostile_text)(_json_round_trip)),
        budget(given(hostile_text)(_react)),
        budget(given(hostile_text)(_stepwise)),
        budget(given(hostile_text)(_sequential)),
        budget(given(class_paths, json_values, json_values)(_message)),
        budget(given(plan_texts)(lambda text: _plan_json(text, plan_file))),
        budget(given(hostile_text)(_output_parser)),
    ]
    for check in checks:
        check()


@FEW
@given(st.integers(-1, 10**6 - 1), st.sampled_from(["{}", " {} ", "`{}`", "{}.", '"{}"', "\n{}.\n"]))
def test_every_valid_choice_parses(value: int, form: str) -> None:
    assert parse_choice(form.format(value), 10**6) == value

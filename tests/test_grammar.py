"""Format grammars: what they admit is checked by llama.cpp's own grammar engine (tests/gbnf.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gbnf import admits, needs_llama

from actions import Kernel, Plugin, ReActAction, SequentialPlanner, StepwiseAction, kernel_function, python_tool
from actions.tools import FunctionRegistry, tool
from actions.tools.grammar import react_grammar, sequential_plan_grammar, stepwise_grammar
from rolecast.errors import UsageError
from rolecast.llm.base import BaseLLM, Completion, LLMSettings, Messages, StructuredRequest
from rolecast.llm.grammar import alternation, free_text, json_schema_grammar, literal
from rolecast.testing import ScriptedLLM


class MathPlugin:
    @kernel_function(description="Add value to a value", name="Add")
    def add(self, input: Annotated[float, "the first number"], amount: Annotated[float, "the number to add"]) -> float:
        return input + amount

    @kernel_function(description="Multiply value to a value", name="Multiply")
    def multiply(self, input: Annotated[float, "first"], amount: Annotated[float, "second"]) -> float:
        return input * amount


@tool
def lookup(country: str, field: str = "capital") -> str:
    """Look a country up."""
    return "Paris"


def math() -> list[Any]:
    return list(Plugin.from_object(MathPlugin()))


# ------------------------------------------------------------------ helpers
def test_literal_escapes_quotes_backslashes_and_newlines() -> None:
    assert literal('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    assert alternation(["x", "y", "x"]) == '("x" | "y")'
    with pytest.raises(UsageError):
        alternation([])
    with pytest.raises(UsageError):
        free_text(0)


@needs_llama
def test_free_text_is_bounded_and_excludes_characters() -> None:
    g = f'root ::= "A: " {free_text(5)} "\\n"\n'
    assert admits(g, "A: hello\n")
    assert not admits(g, "A: hello!\n")  # six characters
    assert not admits(g, "A: \n")  # at least one
    assert not admits(f'root ::= {free_text(9, excluded="[")}\n', "a [b]")


@needs_llama
def test_json_schema_grammar_admits_exactly_the_valid_bounded_values() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "number"},
            "b": {"type": "string", "maxLength": 5},
            "tags": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 2},
            "n": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "required": ["a"],
    }
    g = json_schema_grammar(schema)
    for good in ['{"a": 1}', '{"a": -1.5, "n": null}', '{"a": 2, "b": "h\\"é", "tags": ["x", "y"], "n": 3}',
                 '{"a": 2, "tags": []}']:
        assert admits(g, good), good
    for bad in ['{"b": "x"}', '{"a": 1, "b": "toolong"}', '{"a": 1, "n": 1, "b": "x"}',  # order, bounds
                '{"a": 1, "tags": ["z"]}', '{"a": 1, "tags": ["x", "y", "x"]}', '{"a": 1, "c": 2}', '{"a": 1']:
        assert not admits(g, bad), bad


def test_json_schema_grammar_resolves_local_refs_only() -> None:
    schema = {"$defs": {"P": {"type": "string"}}, "type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}}
    assert "string" in json_schema_grammar(schema)
    with pytest.raises(UsageError, match="local"):
        json_schema_grammar({"$ref": "https://example.com/schema.json"})


# ------------------------------------------------------------------ formats
@needs_llama
def test_react_grammar_admits_a_registered_tool_with_valid_arguments_or_a_final_answer() -> None:
    g = react_grammar(FunctionRegistry.of(python_tool(name="Python REPL"), lookup))
    assert admits(g, 'Thought: I need it\nAction: Python REPL\nAction Input: {"code": "print(1)"}')
    assert admits(g, 'Thought: look\nAction: lookup\nAction Input: {"country": "France", "field": "capital"}')
    assert admits(g, "Thought: I now know the final answer\nFinal Answer: 55")
    assert not admits(g, 'Thought: x\nAction: Python\nAction Input: {"code": "1"}')  # not registered
    assert not admits(g, 'Thought: x\nAction: lookup\nAction Input: {"code": "1"}')  # not its parameter
    assert not admits(g, 'Thought: x\nAction: lookup\nAction Input: {"field": "capital"}')  # required missing
    assert not admits(g, "Thought: x\nAction: Python REPL\nAction Input: print(1)")  # not JSON
    assert not admits(g, "I think the answer is 55")
    assert not admits(g, "Thought: " + "x" * 201 + "\nFinal Answer: 1")  # bounded thought
    final = react_grammar(FunctionRegistry.of(lookup), final_only=True)
    assert admits(final, "Thought: done\nFinal Answer: Paris")
    assert not admits(final, 'Thought: x\nAction: lookup\nAction Input: {"country": "F"}')


@needs_llama
def test_stepwise_grammar_uses_wire_names_and_the_parameter_schema() -> None:
    g = stepwise_grammar(math())
    good = '[THOUGHT]\nmultiply\n[ACTION]\n{"action": "MathPlugin-Multiply", "action_variables": {"input": 2130.23, "amount": 1.23}}'  # noqa: E501
    assert admits(g, good)
    assert admits(g, "[THOUGHT]\ndone\n[FINAL ANSWER]\n2615.18")
    assert not admits(g, good.replace("MathPlugin-Multiply", "MathPlugin-Divide"))
    assert not admits(g, good.replace("2130.23", '"a lot"'))  # a number parameter
    assert not admits(g, "[THOUGHT]\nonly a thought")  # no action, no answer: no progress
    assert not admits(g, "[THOUGHT]\nsee [FINAL ANSWER] x\n[FINAL ANSWER]\n1")


@needs_llama
def test_sequential_plan_grammar_admits_the_seed_plan_and_no_unknown_function() -> None:
    kernel = Kernel(llm=ScriptedLLM([]))
    kernel.add_function("WriterPlugin", prompt="{{$input}}", function_name="ShortPoem")
    kernel.add_function("WriterPlugin", prompt="{{$input}} {{$language}}", function_name="Translate")
    g = sequential_plan_grammar(kernel.functions.functions())
    seed = (
        "<plan>\n"
        '    <!-- First, we create a short poem about "John Doe" -->\n'
        '    <function.WriterPlugin.ShortPoem input="John Doe" setContextVariable="POEM"/>\n'
        '    <function.WriterPlugin.Translate input="$POEM" language="Chinese"'
        ' appendToResult="RESULT__FINAL_ANSWER"/>\n'
        "</plan>"
    )
    assert admits(g, seed)
    assert admits(g, "<plan />")
    assert not admits(g, seed.replace("WriterPlugin.Translate", "EmailPlugin.Send"))
    assert not admits(g, seed.replace('language="Chinese"', 'lang="Chinese"'))  # undeclared parameter
    assert not admits(g, seed.replace('"John Doe"', '"John & Doe"'))  # would not be XML
    assert not admits(g, "<plan>\n</plan>")


def test_grammars_are_built_once_per_tool_set() -> None:
    first = react_grammar(FunctionRegistry.of(Plugin.from_object(MathPlugin())))
    again = react_grammar(FunctionRegistry.of(Plugin.from_object(MathPlugin())))  # new objects, same tools
    assert first is again
    assert react_grammar(FunctionRegistry.of(lookup)) != first


# ------------------------------------------------------------------ the seam and the loops
class NoGrammar(BaseLLM):
    """A provider without the capability: its _complete takes no grammar keyword at all."""

    reaches_a_model = False  # a test double

    def __init__(self) -> None:
        super().__init__("plain")
        self.free = True
        self.prompts: list[str] = []

    async def _complete(self, messages: Messages, *, stop: list[str] | None, settings: LLMSettings,
                        structured: StructuredRequest | None = None,
                        tools: list[dict[str, Any]] | None = None) -> Completion:
        self.prompts.append(str(messages[-1]["content"]))
        return Completion(text="Thought: done\nFinal Answer: 42")


async def test_a_grammar_is_ignored_by_a_model_without_the_capability() -> None:
    llm = NoGrammar()
    assert await llm.ask("hi", grammar='root ::= "x"\n') == "Thought: done\nFinal Answer: 42"
    result = await ReActAction(tools=[lookup], llm=llm).run("capital of France?")
    assert result.output == "42"


async def test_grammar_and_schema_together_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        await ScriptedLLM(["{}"]).complete([{"role": "user", "content": "x"}], grammar='root ::= "x"\n',
                                           structured=StructuredRequest(schema={"type": "object"}))


async def test_react_asks_under_its_grammar_and_generates_the_final_answer_under_the_final_one() -> None:
    call = 'Thought: t\nAction: lookup\nAction Input: {"country": "France"}'
    llm = ScriptedLLM([call, "Thought: t\nFinal Answer: x"])
    agent = ReActAction(tools=[lookup], llm=llm, max_iterations=1, early_stopping_method="generate")
    result = await agent.run("capital?")
    assert result.intermediate_steps[0][1] == "Paris" and result.output == "x"
    registry = FunctionRegistry.of(lookup)
    assert [c.grammar for c in llm.calls] == [react_grammar(registry), react_grammar(registry, final_only=True)]


async def test_no_grammar_when_turned_off_or_the_prompt_is_custom() -> None:
    llm = ScriptedLLM(["Final Answer: a", "Final Answer: b", "[FINAL ANSWER] c"])
    await ReActAction(tools=[lookup], llm=llm, constrain_format=False).run("q")
    await ReActAction(tools=[lookup], llm=llm, template="{tool_descs} {tool_names} {input}").run("q")
    await StepwiseAction(tools=[lookup], llm=llm, template="my prompt {{$question}}").run("q")
    assert [c.grammar for c in llm.calls] == [None, None, None]


async def test_stepwise_and_the_sequential_planner_ask_under_their_grammars() -> None:
    llm = ScriptedLLM(["[THOUGHT]\nx\n[FINAL ANSWER]\n3"])
    await StepwiseAction(tools=[Plugin.from_object(MathPlugin())], llm=llm).run("1+2?")
    assert llm.calls[0].grammar == stepwise_grammar(math())
    registry = FunctionRegistry.of(Plugin.from_object(MathPlugin()))
    planner_llm = ScriptedLLM(['<plan>\n    <function.MathPlugin.Add input="1" amount="2"/>\n</plan>'])
    plan = await SequentialPlanner(registry, llm=planner_llm).create_plan("1+2")
    assert planner_llm.calls[0].grammar == sequential_plan_grammar(registry.functions())
    assert str((await plan.invoke(registry)).value) == "3.0"
    loose = ScriptedLLM(["<plan />"])
    await SequentialPlanner(registry, llm=loose, allow_missing_functions=True).create_plan("x")
    assert loose.calls[0].grammar is None  # unknown functions are wanted: no grammar could list them

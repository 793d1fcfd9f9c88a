"""Prompt functions and the Kernel facade, on scripted models (no network)."""

from __future__ import annotations

from typing import Annotated

import pytest
from loguru import logger

from actions import FunctionRegistry, Plugin, tool
from actions.semantic_kernel import Kernel
from actions.semantic_kernel.prompt_function import (
    FunctionResult,
    InputVariable,
    PromptFunction,
    PromptTemplate,
    template_variables,
)
from rolecast.accounting.cost import CostManager
from rolecast.context import Context
from rolecast.errors import BudgetExceeded, TemplateError, ToolError, UsageError
from rolecast.llm.base import LLMSettings
from rolecast.testing import FunctionLLM, ScriptedLLM


class MathPlugin:
    """Arithmetic."""

    @tool(name="Add")
    def add(
        self,
        number1: Annotated[float, "the first number to add"],
        number2: Annotated[float, "the second number to add"],
    ) -> float:
        """Add two numbers."""
        return number1 + number2


class GetLanguage:
    @tool
    def get(self) -> str:
        """The language to write code in."""
        return "pandas"


def kernel_with(llm: ScriptedLLM | FunctionLLM, **services: ScriptedLLM) -> Kernel:
    kernel = Kernel(llm=llm, services=services)
    kernel.add_plugin(MathPlugin(), "MathPlugin")
    kernel.add_plugin(GetLanguage(), "GetLanguage")
    return kernel


# ------------------------------------------------------------------ rendering
async def test_variables_and_defaults_render() -> None:
    llm = ScriptedLLM(["It wants a greeting."])
    kernel = kernel_with(llm)
    fn = kernel.add_function(
        "Intent",
        prompt="What is the intent of this request? {{$request}} (tone: {{ $tone }}){{$unused}}",
        function_name="Get",
        input_variables=[
            InputVariable(name="request", description="The user input", is_required=True),
            InputVariable(name="tone", default="polite"),
        ],
    )
    result = await kernel.invoke(fn, request="Hello")
    assert isinstance(result, FunctionResult)
    assert str(result) == "It wants a greeting."
    assert result.value == "It wants a greeting."
    assert result.rendered_prompt == "What is the intent of this request? Hello (tone: polite)"
    assert llm.calls[0].prompt == result.rendered_prompt
    assert result.usage is not None and result.usage.total_tokens > 0
    assert result.metadata["arguments"]["tone"] == "polite"


async def test_required_missing_is_a_clear_tool_error() -> None:
    llm = ScriptedLLM([])
    fn = PromptFunction(
        "Translate {{$input}} into {{$language}}",
        function_name="Translate",
        plugin_name="WriterPlugin",
        input_variables=[
            {"name": "input"},
            {"name": "language", "description": "The language which will translate to", "required": True},
        ],
        llm=llm,
    )
    with pytest.raises(ToolError) as info:
        await fn.invoke({"input": "hi"})
    message = str(info.value)
    assert "WriterPlugin.Translate" in message and "'language'" in message
    assert "The language which will translate to" in message
    assert llm.calls == []


async def test_undeclared_variables_are_optional_and_empty() -> None:
    llm = ScriptedLLM(["ok"])
    fn = PromptFunction("[{{$a}}|{{$b}}]", llm=llm)
    assert [p.name for p in fn.parameters] == ["a", "b"]
    assert not any(p.required for p in fn.parameters)
    result = await fn.invoke(a=1)
    assert result.rendered_prompt == "[1|]"


async def test_bare_string_argument_goes_to_the_first_variable() -> None:
    llm = ScriptedLLM(["poem"])
    fn = PromptFunction("Event:{{$input}}", llm=llm)
    result = await fn.invoke("John Doe")
    assert result.rendered_prompt == "Event:John Doe"


async def test_template_calls_functions_while_rendering() -> None:
    llm = ScriptedLLM(["done"])
    kernel = kernel_with(llm)
    kernel.add_function(
        "Code",
        prompt="Please generate {{$number}} sample {{GetLanguage.get}} code; "
        "{{Add '1' '2'}} and {{MathPlugin.Add $x number2='4'}}",
        function_name="Sample",
    )
    result = await kernel.invoke("Code.Sample", number=2, x="3")
    assert result.rendered_prompt == "Please generate 2 sample pandas code; 3.0 and 7.0"


async def test_nested_prompt_function_with_argument() -> None:
    llm = FunctionLLM(lambda messages: "<" + messages[-1]["content"] + ">")
    kernel = Kernel(llm=llm)
    kernel.add_function("Text", prompt="upper({{$input}})", function_name="Upper")
    kernel.add_function("Text", prompt="Say {{Text.Upper $name}}!", function_name="Say")
    result = await kernel.invoke("Text.Say", name="bob")
    # the inner function's reply is rendered into the outer prompt
    assert result.rendered_prompt == "Say <upper(bob)>!"
    assert str(result) == "<Say <upper(bob)>!>"


async def test_literal_blocks_and_syntax_errors() -> None:
    template = PromptTemplate("{{ '{{' }}$x{{ \"}\" }} {{$x}}")
    assert await template.render({"x": "v"}) == "{{$x} v"
    assert template_variables("{{$a}} {{F.g $b 'c'}} {{$a}}") == ["a", "b"]
    with pytest.raises(TemplateError, match="quote a literal"):
        await PromptTemplate("{{MathPlugin.Add one two}}").render(
            {}, functions=FunctionRegistry.of(MathPlugin())
        )
    with pytest.raises(TemplateError, match="unknown function"):
        await PromptTemplate("{{Nope.fn}}").render({}, functions=FunctionRegistry())
    with pytest.raises(TemplateError, match="takes 2 argument"):
        await PromptTemplate("{{MathPlugin.Add '1' '2' '3'}}").render(
            {}, functions=FunctionRegistry.of(Plugin.from_object(MathPlugin(), "MathPlugin"))
        )


# --------------------------------------------------------- settings, services
async def test_settings_and_service_id_reach_the_model() -> None:
    default = ScriptedLLM([])
    creative = ScriptedLLM(["a poem"])
    kernel = kernel_with(default, creative=creative)
    kernel.add_function(
        "WriterPlugin",
        prompt="Write about {{$input}}",
        function_name="Poem",
        settings=LLMSettings(max_tokens=77, temperature=0.9),
        service_id="creative",
        stop=["\n\n"],
        system_prompt="You are a poet.",
    )
    result = await kernel.invoke("WriterPlugin.Poem", input="rain")
    assert str(result) == "a poem"
    assert default.calls == []
    call = creative.calls[0]
    assert call.settings.max_tokens == 77 and call.settings.temperature == 0.9
    assert call.stop == ["\n\n"]
    assert call.messages[0] == {"role": "system", "content": "You are a poet."}
    assert result.metadata["service_id"] == "creative"


async def test_missing_service_falls_back_to_default_with_a_warning() -> None:
    default = ScriptedLLM(["from default"])
    kernel = Kernel(llm=default)
    kernel.add_function("P", prompt="hi", function_name="F", service_id="nowhere")
    seen: list[str] = []
    logger.enable("rolecast")
    sink = logger.add(lambda m: seen.append(str(m)), level="WARNING")
    try:
        result = await kernel.invoke("P.F")
    finally:
        logger.remove(sink)
        logger.disable("rolecast")
    assert str(result) == "from default"
    assert any("nowhere" in line for line in seen)


async def test_kernel_context_counts_usage_and_enforces_the_budget() -> None:
    llm = ScriptedLLM(["fine"], model="gpt-4o")  # a priced model name
    kernel = Kernel(context=Context(llm=llm, cost_manager=CostManager()))
    kernel.add_function("P", prompt="hello {{$input}}", function_name="F")
    await kernel.invoke("P.F", input="world")
    assert kernel.context.cost_manager.total.calls == 1
    assert kernel.context.cost_manager.total_cost > 0

    broke = Kernel(
        context=Context(llm=ScriptedLLM([], model="gpt-4o"), cost_manager=CostManager(max_budget=1e-12))
    )
    broke.add_function("P", prompt="hello {{$input}}", function_name="F")
    with pytest.raises(BudgetExceeded):
        await broke.invoke("P.F", input="world")


# --------------------------------------------------------------------- kernel
async def test_kernel_invokes_tools_with_an_argument_bag() -> None:
    kernel = kernel_with(ScriptedLLM([]))
    result = await kernel.invoke("MathPlugin.Add", {"number1": "1.5"}, number2=2, unrelated="ignored")
    assert isinstance(result, FunctionResult)
    assert result.value == 3.5 and str(result) == "3.5"
    assert kernel.plugins["MathPlugin"]["Add"] is kernel.get_function("MathPlugin", "Add")
    with pytest.raises(ToolError, match="unknown function"):
        await kernel.invoke("MathPlugin.Nope")


async def test_invoke_many_collects_results() -> None:
    llm = ScriptedLLM(["first", "second"])
    kernel = Kernel(llm=llm)
    a = kernel.add_function("P", prompt="A {{$input}}", function_name="A")
    kernel.add_function("P", prompt="B {{$input}}", function_name="B")
    results = await kernel.invoke_many([a, "P.B"], input="x")
    assert [str(r) for r in results] == ["first", "second"]
    assert [c.prompt for c in llm.calls] == ["A x", "B x"]


async def test_add_function_variants() -> None:
    kernel = Kernel(llm=ScriptedLLM([]))

    def shout(text: Annotated[str, "what to shout"]) -> str:
        """Shout it."""
        return text.upper()

    fn = kernel.add_function("Text", shout)
    assert fn.full_name == "Text.shout"
    assert str(await kernel.invoke("Text.shout", text="hey")) == "HEY"
    with pytest.raises(UsageError):
        kernel.add_function("Text")

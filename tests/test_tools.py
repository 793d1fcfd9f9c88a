"""Tools: the decorator, plugins, the three manual renderers, the calculator and the Python tool."""

from __future__ import annotations

import json
import os
import time
from typing import Annotated

import pytest

from actions import (
    FunctionRegistry,
    Plugin,
    kernel_function,
    render_langchain,
    render_qwen,
    render_sk_manual,
    tool,
)
from actions.tools import (
    PythonTool,
    calculator,
    calculator_tool,
    evaluate_arithmetic,
    format_number,
    python_tool,
    strip_code_fence,
    tool_run_scope,
)
from rolecast.context import Context
from rolecast.control.hooks import Hooks
from rolecast.errors import ToolError


# ------------------------------------------------------------------ decorator
def _add(
    input: Annotated[float, "the first number"],
    amount: Annotated[float, "the number to add"] = 1.0,
) -> float:
    """Add value to a value.

    Longer text that is not part of the description.
    """
    return input + amount


add = tool(_add, name="add")


def test_annotated_parameters_and_the_docstring_describe_the_tool():
    assert add.name == "add"
    assert add.description == "Add value to a value."
    first, second = add.parameters
    assert (first.name, first.description, first.annotation, first.required) == (
        "input",
        "the first number",
        float,
        True,
    )
    assert (second.name, second.required, second.default) == ("amount", False, 1.0)
    assert add.json_schema["required"] == ["input"]
    assert add.json_schema["properties"]["input"] == {"type": "number", "description": "the first number"}


def test_openai_schema_uses_a_dash_between_plugin_and_function():
    plugin = Plugin("MathPlugin", [tool(_add, name="Add")])
    schema = plugin["Add"].openai_schema()
    assert schema["type"] == "function"
    assert schema["function"]["name"] == "MathPlugin-Add"
    assert schema["function"]["parameters"]["properties"]["amount"]["default"] == 1.0


async def test_arguments_are_converted_to_the_declared_types():
    assert await add.invoke({"input": "2130.23", "amount": "0.77"}) == 2131.0
    assert await add.invoke('{"input": "2", "amount": 3}') == 5.0
    assert await add.invoke("{'input': 2,}") == 3.0  # JSON5: single quotes, trailing comma
    assert await add(4, 5) == 9.0


async def test_a_wrong_argument_is_a_tool_error_the_model_can_read():
    with pytest.raises(ToolError, match="invalid arguments for add: input"):
        await add.invoke({"input": "not a number"})
    with pytest.raises(ToolError, match="input: Field required"):
        await add.invoke({"amount": 2})
    with pytest.raises(ToolError, match=r"unknown argument\(s\) \['colour'\]"):
        await add.invoke({"input": 1, "colour": "red"})


async def test_sync_async_and_generator_tools_all_return_their_value():
    @tool
    def sync_tool(x: int) -> int:
        """Sync."""
        return x * 2

    @tool
    async def async_tool(x: int) -> int:
        """Async."""
        return x * 3

    @tool
    def generator_tool(n: int):
        """Generator of text."""
        for i in range(n):
            yield str(i)

    @tool
    async def async_generator_tool(n: int):
        """Async generator of numbers."""
        for i in range(n):
            yield i

    assert await sync_tool.invoke({"x": "2"}) == 4
    assert await async_tool.invoke({"x": 2}) == 6
    assert await generator_tool.invoke({"n": 3}) == "012"
    assert await async_generator_tool.invoke({"n": 3}) == [0, 1, 2]


async def test_a_single_input_tool_takes_a_bare_value():
    @tool
    def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    assert await shout.invoke("hello") == "HELLO"


async def test_tool_calls_go_through_the_invocation_hooks():
    hooks = Hooks()
    seen = []

    @hooks.on_invoking(kinds={"tool"})
    def before(inv):
        seen.append((inv.kind, inv.name, dict(inv.arguments)))
        inv.arguments["amount"] = 10.0

    assert await add.invoke({"input": 1}, context=Context(hooks=hooks)) == 11.0
    assert seen == [("tool", "add", {"input": 1.0, "amount": 1.0})]


class MathPlugin:
    """MathPlugin provides a set of functions to make Math calculations."""

    @kernel_function(description="Add value to a value", name="Add")
    def add(
        self, input: Annotated[float, "the first number"], amount: Annotated[float, "the number to add"]
    ) -> float:
        return input + amount

    @kernel_function(description="Subtracts value to a value", name="Subtract")
    def subtract(
        self, input: Annotated[float, "the first number"], amount: Annotated[float, "the number to subtract"]
    ) -> float:
        return input - amount


async def test_plugin_methods_are_bound_and_found_by_every_spelling():
    registry = FunctionRegistry.of(Plugin.from_object(MathPlugin()))
    for name in ("MathPlugin.Add", "MathPlugin-Add", "Add"):
        assert registry.get(name).full_name == "MathPlugin.Add"
    assert await registry.get("MathPlugin-Subtract").invoke({"input": "10", "amount": "2.5"}) == 7.5
    with pytest.raises(
        ToolError, match=r"unknown function 'Divide'; available: MathPlugin\.Add, MathPlugin\.Subtract"
    ):
        registry.get("Divide")


# ------------------------------------------------------------------ renderers
PYTHON_REPL_DESC = (
    "A Python shell. Use this to execute python commands. Input should be a valid python command.\n"
    "    If you expect output it should be printed out."
)


def test_render_langchain_is_name_colon_description_lines():
    repl = tool(lambda command: command, name="Python REPL", description=PYTHON_REPL_DESC)
    calc = calculator_tool(name="Calculator")
    assert render_langchain([repl]) == (
        "Python REPL: A Python shell. Use this to execute python commands. Input should be a valid python "
        "command.\n    If you expect output it should be printed out."
    )
    assert (
        render_langchain([repl, calc])
        .splitlines()[-1]
        .startswith("Calculator: Evaluate an arithmetic expression")
    )


def test_render_qwen_matches_the_seed_prompt_exactly():
    def quark_search(search_query: Annotated[str, "搜索关键词或短语"]) -> str:
        return ""

    def image_gen(query: Annotated[str, "中文关键词,描述了希望图像具有什么内容"]) -> str:
        return ""

    tools = [
        tool(
            quark_search,
            human_name="夸克搜索",
            description="夸克搜索是一个通用搜索引擎,可用于访问互联网、查询百科知识、了解时事新闻等。",
        ),
        tool(
            image_gen,
            human_name="通义万相",
            description="通义万相是一个AI绘画(图像生成)服务,输入文本描述,返回根据文本作画得到的图片的URL",
        ),
    ]
    expected = (
        "quark_search: Call this tool to interact with the 夸克搜索 API. "
        "What is the 夸克搜索 API useful for? "
        "夸克搜索是一个通用搜索引擎,可用于访问互联网、查询百科知识、了解时事新闻等。 Parameters: "
        '[{"name": "search_query", "description": "搜索关键词或短语", "required": true, '
        '"schema": {"type": "string"}}] Format the arguments as a JSON object.\n\n'
        "image_gen: Call this tool to interact with the 通义万相 API. What is the 通义万相 API useful for? "
        "通义万相是一个AI绘画(图像生成)服务,输入文本描述,返回根据文本作画得到的图片的URL Parameters: "
        '[{"name": "query", "description": "中文关键词,描述了希望图像具有什么内容", "required": true, '
        '"schema": {"type": "string"}}] Format the arguments as a JSON object.'
    )
    assert render_qwen(tools) == expected


def test_render_sk_manual_matches_the_seed_manual_exactly():
    def short_poem(input: Annotated[str, "The scenario to turn into a poem."]) -> str:
        return ""

    def translate(input: str, language: Annotated[str, "The language which will translate to"]) -> str:
        return ""

    plugin = Plugin(
        "WriterPlugin",
        [
            tool(
                short_poem,
                name="ShortPoem",
                description="Turn a scenario into a short and entertaining poem.",
            ),
            tool(
                translate, name="Translate", description="Translate the input into a language of your choice"
            ),
        ],
    )
    assert render_sk_manual(plugin) == (
        "WriterPlugin.ShortPoem:\n"
        "  description: Turn a scenario into a short and entertaining poem.\n"
        "  inputs:\n"
        "    - input: The scenario to turn into a poem.\n"
        "\n"
        "WriterPlugin.Translate:\n"
        "  description: Translate the input into a language of your choice\n"
        "  inputs:\n"
        "    - input:\n"
        "    - language: The language which will translate to"
    )


# ----------------------------------------------------------------- calculator
@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("2130.23 * 0.23", "489.9529"),
        ("2130.23 * (1 + 0.23) - 5", "2615.1829"),
        ("-(-3) + +2", "5"),
        ("7 // 2, ", None),
        ("7 // 2", "3"),
        ("7 % 4", "3"),
        ("2 ** 10", "1024"),
        ("2 ** -1", "0.5"),
        ("10 / 4", "2.5"),
        ("sqrt(16) + abs(-2)", "6"),
        ("round(2.567, 2)", "2.57"),
        ("max(1, 5, 3) - min(4, 2)", "3"),
        ("log(e)", "1"),
        ("factorial(5)", "120"),
        ("0.1 + 0.2", "0.3"),
        ("2 * pi", "6.28318530717959"),
        ("1 + 1 =", "2"),
    ],
)
def test_calculator_evaluates_arithmetic(expression, expected):
    if expected is None:
        with pytest.raises(ToolError):
            evaluate_arithmetic(expression)
    else:
        assert format_number(evaluate_arithmetic(expression)) == expected


@pytest.mark.parametrize(
    "expression",
    [
        "x + 1",  # names
        "__import__('os').system('echo hacked')",
        "os.system('ls')",
        "(1).__class__",  # attribute access
        "().__class__.__bases__[0].__subclasses__()",
        "[1, 2][0]",
        "'a' * 3",
        "lambda: 1",
        "[i for i in range(10)]",
        "True + 1",
        "1 if 1 else 2",
        "1 < 2",
        "1 << 100000",
        "2 ^ 3",
        "open('/etc/passwd')",
        "abs(x=1)",
        "",
    ],
)
def test_calculator_refuses_everything_but_arithmetic(expression):
    with pytest.raises(ToolError):
        evaluate_arithmetic(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "9 ** 9 ** 9",
        "10 ** 100000",
        "2 ** 2 ** 2 ** 2 ** 2",
        "10 ** 3000 * 10 ** 3000",
        "factorial(100000)",
        "1e308 * 10",
        "exp(1000)",
        "round(10 ** 300, -10 ** 9)",
        "(" * 500 + "1" + ")" * 500,
        "1" * 2000,
    ],
)
def test_calculator_refuses_huge_results_quickly(expression):
    started = time.monotonic()
    with pytest.raises(ToolError):
        evaluate_arithmetic(expression)
    assert time.monotonic() - started < 1


async def test_calculator_tool_errors_are_readable():
    assert await calculator.invoke({"expression": "2130.23 * 1.23 - 5"}) == "2615.1829"
    assert await calculator.invoke("1 + 2") == "3"
    with pytest.raises(ToolError, match="division by zero"):
        await calculator.invoke("1 / 0")
    with pytest.raises(ToolError, match="use \\*\\* for powers"):
        await calculator.invoke("2 ^ 8")


# ---------------------------------------------------------------- python tool
def test_strip_code_fence():
    assert strip_code_fence("```python\nprint(1)\n```") == "print(1)"
    assert strip_code_fence("```\nx = 1\ny = 2\n```\n") == "x = 1\ny = 2"
    assert strip_code_fence("print('```')") == "print('```')"


async def test_python_tool_runs_code_in_a_subprocess():
    py = python_tool()
    assert isinstance(py, PythonTool)
    assert py.parameters[0].name == "code"
    pid = await py.invoke({"code": "import os\nprint(os.getpid())"})
    assert int(pid) != os.getpid()
    assert await py.invoke("```python\nprint(2 + 3)\n```") == "5"
    assert await py.invoke("fibonacci(10)") == "NameError: name 'fibonacci' is not defined"


async def test_python_tool_keeps_state_within_one_run_scope_only():
    py = python_tool()
    define = "def double(x):\n    return 2 * x"
    with tool_run_scope():
        assert await py.invoke(define) == ""
        assert await py.invoke("print(double(21))") == "42"
    with tool_run_scope():  # a new run starts from nothing
        assert (await py.invoke("print(double(21))")).startswith("NameError")
    await py.invoke(define)  # outside a run: stateless
    assert (await py.invoke("print(double(21))")).startswith("NameError")


async def test_python_tool_without_state_and_with_echo():
    py = python_tool(keep_state=False, echo_last_expression=True, name="Python_REPL")
    with tool_run_scope():
        assert await py.invoke("x = 20\nx + 22") == "42"
        assert (await py.invoke("x")).startswith("NameError")


async def test_python_tool_reports_timeouts():
    py = python_tool(timeout=1)
    observation = await py.invoke("while True:\n    pass")
    assert observation.startswith("TimeoutError")


def test_qwen_parameters_are_json():
    params = json.loads(render_qwen([add]).split("Parameters: ", 1)[1].rsplit(" Format", 1)[0])
    assert params[0]["schema"] == {"type": "number"}

